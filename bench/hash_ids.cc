// Prints HashId (common/data/feature_example.h) of each id given, one a line: what the bucket ids
// of bench/tf1_widedeep.py's TensorFlow pipeline are checked against (tf1_widedeep_test.py).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/data/feature_example.h"

namespace {

bool ParseNonNegative(const char* text, int64_t* out) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < 0) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t buckets = 0;
  if (argc < 3 || !ParseNonNegative(argv[1], &buckets) || buckets < 1) {
    std::fprintf(stderr, "usage: pstrain-bench-hash-ids BUCKETS ID... (BUCKETS >= 1, ids >= 0)\n");
    return 2;
  }
  for (int k = 2; k < argc; ++k) {
    int64_t id = 0;
    if (!ParseNonNegative(argv[k], &id)) {
      std::fprintf(stderr, "pstrain-bench-hash-ids: id '%s' is not an int64 >= 0\n", argv[k]);
      return 2;
    }
    std::printf("%lld\n", static_cast<long long>(pstrain::HashId(id, buckets)));
  }
  return 0;
}
