// Source lines for the simulator's sanitizer reports: an instruction address in a kernel becomes
// "file.cu:line", through addr2line on the object that holds it (the build keeps line tables, -g1).
#include <dlfcn.h>
#include <elf.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "tensor/cuda/sim/checks.h"

namespace ember::cudasim {
namespace {

// Whether the object is position-independent (its addresses are offsets from where it loaded).
bool is_position_independent(const char* path) {
  FILE* f = std::fopen(path, "rb");
  if (f == nullptr) return true;
  Elf64_Ehdr header{};
  const bool read = std::fread(&header, sizeof header, 1, f) == 1;
  std::fclose(f);
  return !read || header.e_type == ET_DYN;
}

std::string run_addr2line(const char* object, uintptr_t address) {
  char command[4096];
  std::snprintf(command, sizeof command, "addr2line -C -f -e '%s' 0x%zx 2>/dev/null", object,
                static_cast<size_t>(address));
  FILE* pipe = popen(command, "r");
  if (pipe == nullptr) return "";
  char function[2048] = "", line[2048] = "";
  const bool ok = std::fgets(function, sizeof function, pipe) != nullptr &&
                  std::fgets(line, sizeof line, pipe) != nullptr;
  pclose(pipe);
  if (!ok || line[0] == '?') return "";
  line[std::strcspn(line, "\n")] = '\0';
  function[std::strcspn(function, "\n")] = '\0';
  std::string name = function;
  for (size_t at; (at = name.find("(anonymous namespace)::")) != std::string::npos;) name.erase(at, 23);
  name.resize(std::min(name.find('('), name.size()));
  std::string where = line;
  // "path/file.cu:42 (discriminator 3)": from the repository's root folders on. A kernel's
  // generated copy (file.sim.cc, third_party/cuda.bzl) has the .cu's line numbers.
  const size_t paren = where.find(" (");
  if (paren != std::string::npos) where.resize(paren);
  size_t root = std::string::npos;
  for (const char* folder : {"tensor/", "tests/", "distributed/"}) root = std::min(root, where.find(folder));
  if (root != std::string::npos) where = where.substr(root);
  const size_t sim = where.find(".sim.cc:");
  if (sim != std::string::npos) where.replace(sim, 7, ".cu");
  return where + " in " + name;
}

}  // namespace

std::string source_line(const void* pc) {
  static std::mutex mutex;
  static std::map<const void*, std::string> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(pc);
  if (it != cache.end()) return it->second;
  char raw[32];
  std::snprintf(raw, sizeof raw, "pc %p", pc);
  std::string line = raw;
  Dl_info info{};
  if (dladdr(pc, &info) != 0 && info.dli_fname != nullptr) {
    const char* object = info.dli_fname[0] != '\0' ? info.dli_fname : "/proc/self/exe";
    // The return address follows the call; the access is the instruction before it.
    uintptr_t address = reinterpret_cast<uintptr_t>(pc) - 1;
    if (is_position_independent(object)) address -= reinterpret_cast<uintptr_t>(info.dli_fbase);
    const std::string found = run_addr2line(object, address);
    if (!found.empty()) line = found;
  }
  cache.emplace(pc, line);
  return line;
}

}  // namespace ember::cudasim
