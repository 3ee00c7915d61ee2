// Which server owns a table's row: every id has one owner in range, ids spread evenly even when
// they are sequential, and the table's name changes where an id goes.
#include "common/row_owner.h"

#include <gtest/gtest.h>

#include <vector>

namespace pstrain {
namespace {

TEST(RowOwnerTest, SequentialIdsSpreadEvenlyOverTheServers) {
  for (int servers : {1, 2, 3, 8}) {
    std::vector<int> count(servers, 0);
    const int ids = 80000;
    for (int64_t id = 0; id < ids; ++id) {
      const int owner = RowOwner("C1", id, servers);
      ASSERT_GE(owner, 0);
      ASSERT_LT(owner, servers);
      ++count[owner];
    }
    for (int s = 0; s < servers; ++s) {
      EXPECT_NEAR(count[s], ids / servers, 0.03 * ids / servers)
          << "server " << s << " of " << servers;
    }
  }
}

TEST(RowOwnerTest, TheHottestFewIdsDoNotAllLandOnOneServer) {
  // Under a Zipf law the first ids carry most lookups; a modulo of a bad hash (or of ids that
  // share a stride) could put them together.
  std::vector<int> count(4, 0);
  for (int64_t id = 0; id < 16; ++id) ++count[RowOwner("C1", id * 1024, 4)];
  for (int s = 0; s < 4; ++s) EXPECT_LE(count[s], 8) << "server " << s;
}

TEST(RowOwnerTest, TheSameIdOfAnotherTableMayGoElsewhereAndOwnersAreStable) {
  int differ = 0;
  for (int64_t id = 0; id < 1000; ++id) {
    differ += RowOwner("C1", id, 4) != RowOwner("C2", id, 4);
    EXPECT_EQ(RowOwner("C1", id, 4), RowOwner(std::string("C1"), id, 4));
  }
  EXPECT_GT(differ, 600);  // about 3/4 of them for independent owners
}

}  // namespace
}  // namespace pstrain
