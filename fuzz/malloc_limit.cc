// libFuzzer fails an input that makes the code allocate more than -malloc_limit_mb at once
// (scripts/fuzz.sh sets 2048). The standalone replay (standalone_main.cc) does the
// same with glibc's allocator behind a size check, so that an input which once made a loader
// allocate gigabytes stays a failing regression test in the gcc build.
//
// Left out under a sanitizer, whose own allocator (and limits) must stay in place.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define PSTRAIN_SANITIZED_ALLOCATOR 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define PSTRAIN_SANITIZED_ALLOCATOR 1
#endif

#ifndef PSTRAIN_SANITIZED_ALLOCATOR

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t count, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
}

namespace {

constexpr size_t kMallocLimitBytes = size_t{2048} << 20;

void CheckSize(size_t size) {
  if (size <= kMallocLimitBytes) return;
  // No stdio: it may allocate.
  const char message[] = "malloc_limit: an allocation above 2048 MiB (libFuzzer: out-of-memory)\n";
  (void)!write(2, message, sizeof(message) - 1);
  abort();
}

}  // namespace

extern "C" {

void* malloc(size_t size) {
  CheckSize(size);
  return __libc_malloc(size);
}

void* calloc(size_t count, size_t size) {
  if (size != 0 && count > static_cast<size_t>(-1) / size) return nullptr;
  CheckSize(count * size);
  return __libc_calloc(count, size);
}

void* realloc(void* p, size_t size) {
  CheckSize(size);
  return __libc_realloc(p, size);
}

void* memalign(size_t alignment, size_t size) {
  CheckSize(size);
  return __libc_memalign(alignment, size);
}

void* aligned_alloc(size_t alignment, size_t size) { return memalign(alignment, size); }

int posix_memalign(void** out, size_t alignment, size_t size) {
  void* p = memalign(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

}  // extern "C"

#endif  // PSTRAIN_SANITIZED_ALLOCATOR
