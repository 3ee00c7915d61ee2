// Which head made a record, as a replica judges it from the maps it holds (ps/record_signature.h):
// the head of the record's epoch, also after a failover, never a server that was head once and
// goes back to its own era, and never an epoch the replica has not seen.
#include "ps/record_signature.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace pstrain {
namespace ps {
namespace {

using wire::Message;
using wire::MessageType;

class RecordSignatureTest : public ::testing::Test {
 protected:
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static void SetUpTestSuite() {
    // Per process: ctest runs each test as a process of its own, side by side.
    dir_ = new std::string(::testing::TempDir() + "/record_signature_keys_" +
                           std::to_string(getpid()));
    std::filesystem::remove_all(*dir_);
    ASSERT_TRUE(wire::WriteClusterKeys(*dir_, /*ps=*/3, /*workers=*/1, /*evaluators=*/0).ok());
  }
  static wire::ClusterKeys Ps(int t) {
    auto keys = wire::LoadClusterKeys(*dir_ + "/ps-" + std::to_string(t), "ps", t);
    EXPECT_TRUE(keys.ok()) << keys.status().ToString();
    return *keys;
  }
  // Record `sequence` of shard 0 made by ps `maker` under map `epoch`.
  static Message MadeBy(int maker, uint64_t epoch, uint64_t sequence) {
    Message m;
    m.type = MessageType::kReplicate;
    m.shard = 0;
    m.sequence = sequence;
    m.value = static_cast<int64_t>(sequence);
    m.tensors = {{"w", Tensor::Filled(Shape{3}, 0.25f)}};
    RecordSignature head(Ps(maker));
    EXPECT_TRUE(head.Sign(epoch, &m).ok());
    EXPECT_EQ(m.made_epoch, epoch);
    return m;
  }
  static std::string* dir_;
};

std::string* RecordSignatureTest::dir_ = nullptr;

TEST_F(RecordSignatureTest, TheHeadsRecordIsTakenAndAMiddleReplicasOwnIsRefused) {
  RecordSignature tail(Ps(2));
  tail.SawMap(1, /*head=*/0);  // chain [0, 1, 2]
  EXPECT_TRUE(tail.Check(MadeBy(0, 1, 1)).ok()) << tail.Check(MadeBy(0, 1, 1)).ToString();
  const Status s = tail.Check(MadeBy(1, 1, 1));
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("record 1 of shard 0 (head: task 0)"), std::string::npos)
      << s.message();
}

TEST_F(RecordSignatureTest, AfterAFailoverTheOldHeadsRecordsAreCheckedAgainstTheOldHead) {
  RecordSignature tail(Ps(2));
  tail.SawMap(1, 0);  // [0, 1, 2]
  tail.SawMap(2, 1);  // ps 0 died: [1, 2]; ps 1 resends ps 0's unacknowledged records
  EXPECT_TRUE(tail.Check(MadeBy(0, 1, 5)).ok()) << "ps 0's record, resent by the new head";
  EXPECT_FALSE(tail.Check(MadeBy(1, 1, 5)).ok()) << "ps 1 passed off a record as ps 0's era's";
  tail.Took(MadeBy(0, 1, 5));
  EXPECT_TRUE(tail.Check(MadeBy(1, 2, 6)).ok()) << "the new head's own record";
  EXPECT_FALSE(tail.Check(MadeBy(0, 2, 6)).ok()) << "the old head under the new map";
}

TEST_F(RecordSignatureTest, AServerThatWasHeadOnceCannotGoBackToItsEra) {
  RecordSignature tail(Ps(2));
  tail.SawMap(1, 1);  // ps 1 was head
  tail.SawMap(2, 0);  // ps 1 died; it rejoins later as a middle replica of [0, 1, 2]
  tail.SawMap(3, 0);
  ASSERT_TRUE(tail.Check(MadeBy(0, 3, 8)).ok());
  tail.Took(MadeBy(0, 3, 8));
  const Status s = tail.Check(MadeBy(1, 1, 9));
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("made under map epoch 1, older than the record before it (3)"),
            std::string::npos)
      << s.message();
}

TEST_F(RecordSignatureTest, ARecordOfAnEpochTheReplicaHasNotSeenIsRefused) {
  RecordSignature tail(Ps(2));
  EXPECT_FALSE(tail.Check(MadeBy(0, 1, 1)).ok()) << "no map held";
  tail.SawMap(1, 0);
  const Status s = tail.Check(MadeBy(0, 2, 1));
  EXPECT_NE(s.message().find("made under map epoch 2, which this replica has not seen"),
            std::string::npos)
      << s.message();
}

TEST_F(RecordSignatureTest, AJoinerTakesRecordsMadeBeforeItsFirstMapFromThatMapsHead) {
  RecordSignature joiner(Ps(2));
  joiner.SawMap(4, 0);  // its first map: it joins [0, 1]; records made under 3 are in flight
  EXPECT_TRUE(joiner.Check(MadeBy(0, 3, 2)).ok());
  EXPECT_FALSE(joiner.Check(MadeBy(1, 3, 2)).ok());
}

TEST_F(RecordSignatureTest, PlaintextSignsAndChecksNothing) {
  RecordSignature head{wire::ClusterKeys{}}, tail{wire::ClusterKeys{}};
  Message m;
  m.type = MessageType::kReplicate;
  ASSERT_TRUE(head.Sign(1, &m).ok());
  EXPECT_TRUE(m.record_tags.empty());
  EXPECT_TRUE(tail.Check(m).ok());
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
