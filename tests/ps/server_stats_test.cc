// A task's totals are its shards' stats summed: every field, so that no counter (outliers
// scaled, records replicated) reads 0 in the summaries while its shard counts it.
#include "ps/server_stats.h"

#include <gtest/gtest.h>

#include <cstring>

namespace pstrain {
namespace ps {
namespace {

TEST(ServerStatsTest, AddingSumsEveryField) {
  // Every field is an int64_t, so the struct reads as an array of them: a field added without
  // its line in operator+= stays at its own value here and fails.
  constexpr size_t kFields = sizeof(ServerStats) / sizeof(int64_t);
  static_assert(sizeof(ServerStats) == kFields * sizeof(int64_t), "ServerStats is all int64_t");
  int64_t a_fields[kFields], b_fields[kFields];
  for (size_t i = 0; i < kFields; ++i) {
    a_fields[i] = static_cast<int64_t>(i) + 1;
    b_fields[i] = 100 * (static_cast<int64_t>(i) + 1);
  }
  ServerStats a, b;
  std::memcpy(&a, a_fields, sizeof(a));
  std::memcpy(&b, b_fields, sizeof(b));
  a += b;
  std::memcpy(a_fields, &a, sizeof(a));
  for (size_t i = 0; i < kFields; ++i) {
    EXPECT_EQ(a_fields[i], 101 * (static_cast<int64_t>(i) + 1)) << "field " << i << " not summed";
  }
  EXPECT_EQ(a.scaled_outliers, b.scaled_outliers + b.scaled_outliers / 100);
  EXPECT_EQ(a.records_replicated, b.records_replicated + b.records_replicated / 100);
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
