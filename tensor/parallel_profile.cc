#include "tensor/parallel_profile.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <typeindex>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

namespace ember {
namespace {

using Ms = std::chrono::duration<double, std::milli>;

// Totals of one call site's regions, in milliseconds.
struct SiteTotals {
  int64_t regions = 0;
  double wall = 0, idle = 0, last_began = 0, finish_spread = 0;

  SiteTotals& operator+=(const SiteTotals& other) {
    regions += other.regions;
    wall += other.wall;
    idle += other.idle;
    last_began += other.last_began;
    finish_spread += other.finish_spread;
    return *this;
  }
};

// The body type's name without the parameter lists and anonymous namespaces: a lambda in
// ember::cpu::AVX2::(anonymous namespace)::winograd_forward(float const*, ...) reads
// "ember::cpu::AVX2::winograd_forward::{lambda#1}".
std::string site_name(const char* mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(
      abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  const std::string full = status == 0 ? demangled.get() : mangled;
  std::string name;
  int parens = 0;
  for (char c : full) {
    if (c == '(') ++parens;
    if (parens == 0) name += c;
    if (c == ')' && parens > 0) --parens;
  }
  // "(anonymous namespace)" went with the parentheses; its "::" stays doubled.
  for (size_t at; (at = name.find("::::")) != std::string::npos;) name.replace(at, 4, "::");
  return name;
}

class Profile {
 public:
  void add(const std::type_info& site, const SiteTotals& region) {
    std::lock_guard<std::mutex> lock(mutex_);
    sites_[std::type_index(site)] += region;
  }

  std::string report() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::pair<std::type_index, SiteTotals>> sites(sites_.begin(), sites_.end());
    std::sort(sites.begin(), sites.end(),
              [](const auto& a, const auto& b) { return a.second.idle > b.second.idle; });
    SiteTotals all;
    for (const auto& [site, s] : sites) all += s;
    std::string out = fmt::format(
        "parallel regions (EMBER_PARALLEL_PROFILE): {} regions, {:.1f} ms wall, {:.1f} ms of "
        "thread time idle in them\n{:>8} {:>10} {:>10} {:>12} {:>14}  call site\n",
        all.regions, all.wall, all.idle, "regions", "wall_ms", "idle_ms", "last_began_ms",
        "finish_gap_ms");
    for (const auto& [site, s] : sites) {
      out += fmt::format("{:>8} {:>10.2f} {:>10.2f} {:>12.2f} {:>14.2f}  {}\n", s.regions, s.wall,
                         s.idle, s.last_began, s.finish_spread, site_name(site.name()));
    }
    return out;
  }

  ~Profile() {
    if (!sites_.empty()) std::fputs(report().c_str(), stderr);
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::type_index, SiteTotals> sites_;
};

Profile& profile() {
  static Profile p;
  return p;
}

}  // namespace

bool parallel_profile_enabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("EMBER_PARALLEL_PROFILE");
    return env != nullptr && *env != '\0' && std::strcmp(env, "0") != 0;
  }();
  return enabled;
}

std::string parallel_profile_report() {
  return parallel_profile_enabled() ? profile().report() : std::string();
}

namespace detail {

RegionProfile::RegionProfile(int threads)
    : enabled_(parallel_profile_enabled()), threads_(threads) {
  if (!enabled_) return;
  profile();  // constructed before the first region ends, so destroyed after the last
  start_ = Clock::now();
  began_.reset(new Clock::time_point[threads]);
  finished_.reset(new Clock::time_point[threads]);
  std::fill(began_.get(), began_.get() + threads, start_);
  std::fill(finished_.get(), finished_.get() + threads, start_);
}

RegionProfile::~RegionProfile() = default;

void RegionProfile::thread_began(int t) {
  if (enabled_) began_[t] = Clock::now();
}

void RegionProfile::thread_finished(int t) {
  if (enabled_) finished_[t] = Clock::now();
}

void RegionProfile::record(const std::type_info& site) {
  if (!enabled_) return;
  const Clock::time_point end = Clock::now();
  SiteTotals region;
  region.regions = 1;
  region.wall = Ms(end - start_).count();
  region.idle = threads_ * region.wall;
  Clock::time_point last_began = start_, first_finished = end, last_finished = start_;
  for (int t = 0; t < threads_; ++t) {
    region.idle -= Ms(finished_[t] - began_[t]).count();
    last_began = std::max(last_began, began_[t]);
    first_finished = std::min(first_finished, finished_[t]);
    last_finished = std::max(last_finished, finished_[t]);
  }
  region.last_began = Ms(last_began - start_).count();
  region.finish_spread = Ms(last_finished - first_finished).count();
  profile().add(site, region);
}

}  // namespace detail
}  // namespace ember
