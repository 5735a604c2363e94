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

#include "sim/cuda/checks.h"

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

struct Located {
  std::string line;      // "path:line", or "" when unknown
  std::string function;  // without its parameters, or ""
};

Located run_addr2line(const char* object, uintptr_t address) {
  char command[4096];
  std::snprintf(command, sizeof command, "addr2line -C -f -e '%s' 0x%zx 2>/dev/null", object,
                static_cast<size_t>(address));
  FILE* pipe = popen(command, "r");
  if (pipe == nullptr) return {};
  char function[2048] = "", line[2048] = "";
  const bool ok = std::fgets(function, sizeof function, pipe) != nullptr &&
                  std::fgets(line, sizeof line, pipe) != nullptr;
  pclose(pipe);
  if (!ok) return {};
  line[std::strcspn(line, "\n")] = '\0';
  function[std::strcspn(function, "\n")] = '\0';
  std::string name = function;
  for (size_t at; (at = name.find("(anonymous namespace)::")) != std::string::npos;) name.erase(at, 23);
  name.resize(std::min(name.find('('), name.size()));
  if (name.rfind("void ", 0) == 0) name.erase(0, 5);  // a template's return type
  if (name == "??") name.clear();
  if (line[0] == '?') return {"", name};
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
  return {where, name};
}

// What addr2line says of `address` in the object that holds it (cached: reports repeat).
Located locate(uintptr_t address) {
  static std::mutex mutex;
  static std::map<uintptr_t, Located> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(address);
  if (it != cache.end()) return it->second;
  Located found;
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(address), &info) != 0 && info.dli_fname != nullptr) {
    const char* object = info.dli_fname[0] != '\0' ? info.dli_fname : "/proc/self/exe";
    uintptr_t in_object = address;
    if (is_position_independent(object)) in_object -= reinterpret_cast<uintptr_t>(info.dli_fbase);
    found = run_addr2line(object, in_object);
  }
  cache.emplace(address, found);
  return found;
}

}  // namespace

std::string source_line(const void* pc) {
  // The return address follows the call; the access is the instruction before it.
  const Located at = locate(reinterpret_cast<uintptr_t>(pc) - 1);
  if (at.line.empty()) {
    char raw[32];
    std::snprintf(raw, sizeof raw, "pc %p", pc);
    return raw;
  }
  return at.function.empty() ? at.line : at.line + " in " + at.function;
}

std::string kernel_label(const char* spelled, const void* entry) {
  if (entry == nullptr) return spelled;
  const Located at = locate(reinterpret_cast<uintptr_t>(entry));
  return at.function.empty() ? std::string(spelled) : at.function;
}

}  // namespace ember::cudasim
