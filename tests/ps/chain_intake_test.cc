// Which replication requests a shard takes from the chain before it looks inside one, and the
// ones of a newer map kept until it arrives (ps/chain_intake.h).
#include "ps/chain_intake.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/wire/request.h"

namespace pstrain {
namespace ps {
namespace {

using wire::Message;
using wire::MessageType;

// Shard 1's chain at `epoch`: tasks 0, 1, 2, this task the middle one.
ReplicaChain MiddleOfThree(uint64_t epoch) {
  ReplicaChain chain;
  ReplicaChain::Change change;
  chain.Set({epoch, {0, 1, 2}, {}, 1}, &change);
  return chain;
}

Message Record(int from_task, uint64_t epoch, int shard = 1) {
  Message m = wire::Request(MessageType::kReplicate, "ps", from_task);
  m.shard = shard;
  m.map_epoch = epoch;
  return m;
}

TEST(ChainIntakeTest, ARecordFromThePredecessorIsTakenWhateverMapItWasSentUnder) {
  ChainIntake intake(1);
  const ReplicaChain chain = MiddleOfThree(3);
  Status why;
  EXPECT_EQ(intake.Check(chain, "p", Record(0, 3), &why), ChainIntake::Verdict::kTake);
  EXPECT_EQ(intake.Check(chain, "p", Record(0, 2), &why), ChainIntake::Verdict::kTake);
  EXPECT_EQ(intake.waiting(), 0u);
}

TEST(ChainIntakeTest, ARecordOfANewerMapWaitsForItAndIsTakenBackOnce) {
  ChainIntake intake(1);
  const ReplicaChain chain = MiddleOfThree(3);
  Status why;
  EXPECT_EQ(intake.Check(chain, "p", Record(0, 5), &why), ChainIntake::Verdict::kWait);
  EXPECT_EQ(intake.waiting(), 1u);
  std::vector<ChainIntake::Waiting> waiting = intake.TakeWaiting();
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_EQ(waiting[0].peer, "p");
  EXPECT_EQ(waiting[0].request.map_epoch, 5u);
  EXPECT_TRUE(intake.TakeWaiting().empty());
}

TEST(ChainIntakeTest, ARecordFarAheadOfThisTasksMapIsRefusedNotKept) {
  ChainIntake intake(1);
  Status why;
  EXPECT_EQ(intake.Check(MiddleOfThree(3), "p", Record(0, 100), &why),
            ChainIntake::Verdict::kRefuse);
  EXPECT_EQ(why.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(why.message().find("map epoch 100"), std::string::npos) << why.message();
  EXPECT_EQ(intake.waiting(), 0u);
}

TEST(ChainIntakeTest, ASenderThatFillsTheQueueIsRefusedUnavailable) {
  ChainIntake intake(1);
  const ReplicaChain chain = MiddleOfThree(3);
  Status why;
  ChainIntake::Verdict last = ChainIntake::Verdict::kWait;
  size_t kept = 0;
  while (last == ChainIntake::Verdict::kWait && kept < 100000) {
    last = intake.Check(chain, "p", Record(0, 4), &why);
    if (last == ChainIntake::Verdict::kWait) ++kept;
  }
  EXPECT_EQ(last, ChainIntake::Verdict::kRefuse);
  EXPECT_EQ(why.code(), StatusCode::kUnavailable);
  EXPECT_EQ(intake.waiting(), kept);
}

TEST(ChainIntakeTest, RefusalsNameTheShardTheSenderOrTheMissingMap) {
  ChainIntake intake(1);
  const ReplicaChain chain = MiddleOfThree(3);
  Status why;
  EXPECT_EQ(intake.Check(chain, "p", Record(0, 3, /*shard=*/2), &why),
            ChainIntake::Verdict::kRefuse);
  EXPECT_EQ(why.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(why.message().find("for shard 2 reached shard 1"), std::string::npos);

  EXPECT_EQ(intake.Check(chain, "p", Record(2, 3), &why), ChainIntake::Verdict::kRefuse);
  EXPECT_EQ(why.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(why.message().find("ps 2, which is not the predecessor"), std::string::npos);

  EXPECT_EQ(intake.Check(chain, "p", Record(2, 2), &why), ChainIntake::Verdict::kRefuse);
  EXPECT_EQ(why.code(), StatusCode::kAborted);

  EXPECT_EQ(intake.Check(ReplicaChain(), "p", Record(0, 0), &why), ChainIntake::Verdict::kRefuse);
  EXPECT_EQ(why.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(why.message().find("no shard map yet"), std::string::npos);
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
