// jemalloc's options for the binaries that link it (CMakeLists.txt, pstrain_allocator): jemalloc
// reads this global at its start, before MALLOC_CONF from the environment, which can still
// override each option.
//   thp:always             its memory on transparent huge pages, as glibc's under the launcher's
//                          GLIBC_TUNABLES=glibc.malloc.hugetlb=1: the README's job ran 91.8 s
//                          (179 CPU-s) against 94.0-95.2 s with glibc and 97.9-101 s with tcmalloc,
//                          which has no huge pages
//   oversize_threshold:0   no arena of its own for blocks above 8 MiB, which returns their pages
//                          at once: a received 64 MiB frame's pages are reused, not zeroed again
//   dirty_decay_ms:10000   freed pages kept 10 s for reuse, then given back to the kernel
//   muzzy_decay_ms:0       and given back at once from there
extern "C" {
extern const char* malloc_conf;
const char* malloc_conf = "thp:always,oversize_threshold:0,dirty_decay_ms:10000,muzzy_decay_ms:0";
}
