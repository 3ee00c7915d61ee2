// StateStamps: when a head stamps a record with its state's digest, and what a replica makes of
// a stamp (ps/state_stamps.h). The servers that use it: replica_chain_test.cc.
#include "ps/state_stamps.h"

#include <gtest/gtest.h>

namespace pstrain {
namespace ps {
namespace {

using std::chrono::milliseconds;
using Verdict = StateStamps::Verdict;

TEST(StateStampsTest, AHeadStampsOnlyWhileAJoinerIsListedAndAtMostOnceASecond) {
  StateStamps stamps;
  const auto t0 = StateStamps::Clock::now();
  EXPECT_FALSE(stamps.Due(/*joiner_listed=*/false, t0)) << "no joiner: no record pays for one";
  ASSERT_TRUE(stamps.Due(true, t0)) << "the first record after a joiner is listed";
  stamps.Stamped(t0);
  EXPECT_FALSE(stamps.Due(true, t0 + milliseconds(999)));
  EXPECT_TRUE(stamps.Due(true, t0 + milliseconds(1000)));
  EXPECT_FALSE(stamps.Due(false, t0 + milliseconds(5000)));
}

TEST(StateStampsTest, AJoinerAcknowledgesNothingPastItsCopyUntilAStampVerifiesIt) {
  StateStamps stamps;
  EXPECT_EQ(stamps.Acknowledgeable(9, /*joiner=*/true), 9) << "no copy installed: nothing held";
  stamps.CopyInstalled(/*from=*/1, /*sequence=*/4);
  ASSERT_TRUE(stamps.unverified());
  EXPECT_EQ(stamps.copy_from(), 1);
  EXPECT_EQ(stamps.Acknowledgeable(9, true), 4);
  EXPECT_EQ(stamps.Acknowledgeable(3, true), 3);
  EXPECT_EQ(stamps.Acknowledgeable(9, /*joiner=*/false), 9) << "a member acknowledges all";
  EXPECT_EQ(stamps.Compare("head", "head"), Verdict::kVerified);
  EXPECT_FALSE(stamps.unverified());
  EXPECT_EQ(stamps.Acknowledgeable(9, true), 9);
  EXPECT_EQ(stamps.Compare("head", "head"), Verdict::kAgrees) << "verified once";
}

TEST(StateStampsTest, AStampUnlikeTheStateIsAForgedCopyOnAJoinerAndDivergenceElsewhere) {
  StateStamps stamps;
  EXPECT_EQ(stamps.Compare("head", "other"), Verdict::kDiverged);
  stamps.CopyInstalled(2, 7);
  EXPECT_EQ(stamps.Compare("head", "other"), Verdict::kForgedCopy);
  EXPECT_TRUE(stamps.unverified()) << "a wrong copy is never taken as verified";
  EXPECT_EQ(stamps.Acknowledgeable(9, true), 7);
  stamps.CopyDropped();
  EXPECT_FALSE(stamps.unverified());
  EXPECT_EQ(stamps.copy_from(), -1);
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
