// One row push per row pull (ps/row_pull_ledger.h): which pushes a ledger lets in, by sender,
// process, table and ids.
#include "ps/row_pull_ledger.h"

#include <gtest/gtest.h>

namespace pstrain::ps {
namespace {

constexpr uint64_t kProcess = 7;

TEST(RowPullLedgerTest, APushUsesUpThePullThatNamedItsIds) {
  RowPullLedger ledger;
  ledger.NotePull("worker 1", kProcess, "C1", {5, 3, 5});
  EXPECT_TRUE(ledger.MayPush("worker 1", kProcess, "C1", {3}).ok());
  EXPECT_TRUE(ledger.MayPush("worker 1", kProcess, "C1", {5, 3}).ok());
  ledger.NotePush("worker 1", kProcess, "C1", {5, 3});
  const Status again = ledger.MayPush("worker 1", kProcess, "C1", {5, 3});
  EXPECT_EQ(again.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(again.message().find("worker 1's row push to table 'C1'"), std::string::npos)
      << again.message();
}

TEST(RowPullLedgerTest, IdsNoOpenPullNamedAreRefused) {
  RowPullLedger ledger;
  ledger.NotePull("worker 1", kProcess, "C1", {1, 2});
  EXPECT_FALSE(ledger.MayPush("worker 1", kProcess, "C1", {1, 9}).ok());
  EXPECT_TRUE(ledger.MayPush("worker 2", kProcess, "C1", {9}).ok());  // its first push
}

TEST(RowPullLedgerTest, ANewHeadLetsInOneFirstPushPerTableThenWantsPulls) {
  // A backup that has just become its shard's head saw none of a worker's pulls, and that
  // worker's step pushes to every table at once.
  RowPullLedger ledger;
  for (const char* table : {"C1", "C2", "C3"}) {
    ASSERT_TRUE(ledger.MayPush("worker 1", kProcess, table, {4}).ok()) << table;
    ledger.NotePush("worker 1", kProcess, table, {4});
  }
  for (const char* table : {"C1", "C2", "C3"}) {
    EXPECT_FALSE(ledger.MayPush("worker 1", kProcess, table, {4}).ok()) << table;
  }
  EXPECT_FALSE(ledger.MayPush("worker 1", kProcess + 1, "C1", {4}).ok()) << "a new process";
  ledger.NotePull("worker 1", kProcess, "C2", {4});
  EXPECT_TRUE(ledger.MayPush("worker 1", kProcess, "C2", {4}).ok());
}

TEST(RowPullLedgerTest, TwoPullsOfOneTableOpenTwoPushesInEitherOrder) {
  RowPullLedger ledger;  // two embedding layers sharing one table pull it twice a step
  ledger.NotePull("worker 0", kProcess, "shared", {1, 2});
  ledger.NotePull("worker 0", kProcess, "shared", {3});
  ASSERT_TRUE(ledger.MayPush("worker 0", kProcess, "shared", {3}).ok());
  ledger.NotePush("worker 0", kProcess, "shared", {3});
  ASSERT_TRUE(ledger.MayPush("worker 0", kProcess, "shared", {2, 1}).ok());
  ledger.NotePush("worker 0", kProcess, "shared", {2, 1});
  EXPECT_FALSE(ledger.MayPush("worker 0", kProcess, "shared", {1}).ok());
  EXPECT_FALSE(ledger.MayPush("worker 0", kProcess, "shared", {3}).ok());
}

TEST(RowPullLedgerTest, AtMostFourPullsStayOpen) {
  RowPullLedger ledger;
  for (int64_t id = 0; id < 6; ++id) ledger.NotePull("worker 0", kProcess, "C1", {id});
  EXPECT_FALSE(ledger.MayPush("worker 0", kProcess, "C1", {0}).ok());  // forgotten
  EXPECT_FALSE(ledger.MayPush("worker 0", kProcess, "C1", {1}).ok());
  for (int64_t id = 2; id < 6; ++id)
    EXPECT_TRUE(ledger.MayPush("worker 0", kProcess, "C1", {id}).ok());
}

// A key that mints a new incarnation per request gets no push without a pull: the free first
// push is the sender's, once, not each process's; a new process's own pulls open its pushes,
// and the older process's pulls no longer do.
TEST(RowPullLedgerTest, ANewProcessGetsNoFreePushButItsOwnPullsOpenPushes) {
  RowPullLedger ledger;
  ASSERT_TRUE(ledger.MayPush("worker 0", kProcess, "C1", {0}).ok());  // the sender's first
  ledger.NotePush("worker 0", kProcess, "C1", {0});
  ledger.NotePull("worker 0", kProcess, "C1", {1});
  for (uint64_t forged = kProcess + 1; forged < kProcess + 20; ++forged) {
    EXPECT_FALSE(ledger.MayPush("worker 0", forged, "C1", {0}).ok()) << forged;
  }
  ledger.NotePull("worker 0", kProcess + 1, "C1", {2});
  EXPECT_TRUE(ledger.MayPush("worker 0", kProcess + 1, "C1", {2}).ok());
  EXPECT_FALSE(ledger.MayPush("worker 0", kProcess + 1, "C1", {1}).ok()) << "the old process's";
}

}  // namespace
}  // namespace pstrain::ps
