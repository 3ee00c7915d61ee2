#include "common/process_memory.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>

namespace pstrain {

int64_t ResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  long long kib = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::strncmp(line, "VmRSS:", 6) == 0) {
      std::sscanf(line + 6, "%lld", &kib);
      break;
    }
  }
  std::fclose(f);
  return static_cast<int64_t>(kib) * 1024;
}

const char* AllocatorName() {
  return dlsym(RTLD_DEFAULT, "mallctl") != nullptr ? "jemalloc" : "glibc malloc";
}

}  // namespace pstrain
