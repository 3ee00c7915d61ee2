// The head's tags of a replication record (common/wire/record_tag.h): made by the head's key for
// each other server, checked by that server alone, and broken by any change to what the record
// applies, a tensor's bytes included.
#include "common/wire/record_tag.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

namespace pstrain {
namespace wire {
namespace {

class RecordTagTest : public ::testing::Test {
 protected:
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static void SetUpTestSuite() {
    // Per process: ctest runs each test as a process of its own, side by side.
    dir_ = new std::string(::testing::TempDir() + "/record_tag_keys_" + std::to_string(getpid()));
    std::filesystem::remove_all(*dir_);
    ASSERT_TRUE(WriteClusterKeys(*dir_, /*ps=*/3, /*workers=*/1, /*evaluators=*/0).ok());
  }
  static ClusterKeys Ps(int t) {
    auto keys = LoadClusterKeys(*dir_ + "/ps-" + std::to_string(t), "ps", t);
    EXPECT_TRUE(keys.ok()) << keys.status().ToString();
    return *keys;
  }
  // A record of shard 0 as its head (ps 0) makes it, tagged.
  static Message Record() {
    Message m;
    m.type = MessageType::kReplicate;
    m.shard = 0;
    m.sequence = 7;
    m.step = 6;
    m.value = 7;
    m.made_epoch = 3;
    m.link = std::string(32, 'l');
    m.tensors = {{"fc/weights", Tensor::Filled(Shape{2, 4}, 0.5f)}};
    m.pushes = {{"worker", 0, 11, 4, 7, 0, ""}};
    auto tags = TagRecord(m, Ps(0));
    EXPECT_TRUE(tags.ok()) << tags.status().ToString();
    m.record_tags = *tags;
    return m;
  }
  static std::string* dir_;
};

std::string* RecordTagTest::dir_ = nullptr;

TEST_F(RecordTagTest, TheHeadTagsARecordForEveryOtherServerAndEachChecksItsOwn) {
  const Message record = Record();
  ASSERT_EQ(record.record_tags.size(), 2u);
  EXPECT_EQ(record.record_tags[0].name, "ps-1");
  EXPECT_EQ(record.record_tags[1].name, "ps-2");
  EXPECT_NE(record.record_tags[0].tag, record.record_tags[1].tag) << "one tag passes for both";
  for (int t : {1, 2}) {
    EXPECT_TRUE(CheckRecordTag(record, /*head_task=*/0, Ps(t)).ok())
        << CheckRecordTag(record, 0, Ps(t)).ToString();
  }
}

TEST_F(RecordTagTest, ARecordWhoseTensorByteChangedIsRefusedNamingShardSequenceAndHead) {
  Message record = Record();
  Tensor changed = record.tensors[0].tensor.Clone();
  unsigned char* bytes = reinterpret_cast<unsigned char*>(changed.data());
  bytes[5] ^= 1;  // one bit of one float
  record.tensors[0].tensor = changed;
  const Status s = CheckRecordTag(record, 0, Ps(2));
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  EXPECT_NE(s.message().find("record 7 of shard 0 (head: task 0) carries a tag for ps-2 that the "
                             "head's key did not make"),
            std::string::npos)
      << s.message();
}

TEST_F(RecordTagTest, EveryFieldAReplicaAppliesIsCoveredByTheDigest) {
  const Message base = Record();
  const std::string digest = RecordDigest(base);
  std::vector<void (*)(Message*)> changes = {
      [](Message* m) { m->sequence += 1; },
      [](Message* m) { m->step += 1; },
      [](Message* m) { m->value += 1; },
      [](Message* m) { m->made_epoch += 1; },
      [](Message* m) { m->link[0] ^= 1; },
      [](Message* m) { m->state_digest = std::string(32, 's'); },
      [](Message* m) { m->tensors[0].name = "fc/bias"; },
      [](Message* m) {
        m->tensors[0].tensor = m->tensors[0].tensor.Reshaped(Shape{4, 2});
      },
      [](Message* m) { m->assigns = {"fc/weights"}; },
      [](Message* m) { m->pushes[0].reply_value = 1; },
      [](Message* m) { m->pushes[0].reply_text = "stale"; },
      [](Message* m) {
        m->uses = {{0, 1, 2}};
      },
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    Message m = base;
    changes[i](&m);
    EXPECT_NE(RecordDigest(m), digest) << "change " << i << " left the digest as it was";
  }
  Message hop = base;  // what each sender sets for itself
  hop.task_index = 1;
  hop.map_epoch = 9;
  hop.incarnation = 5;
  EXPECT_EQ(RecordDigest(hop), digest) << "the digest changes hop by hop";
}

TEST_F(RecordTagTest, ATagMadeWithAnotherServersKeyIsRefused) {
  Message record = Record();
  // A middle replica (ps 1) tags the record itself: ps 2 checks it against the head's key.
  auto forged = TagRecord(record, Ps(1));
  ASSERT_TRUE(forged.ok());
  record.record_tags = *forged;
  const Status s = CheckRecordTag(record, 0, Ps(2));
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  // Taken as ps 1's own record it checks out: which task made a record is for the replica to
  // judge from the maps it holds (ps/record_signature.h), never for the record to say.
  EXPECT_TRUE(CheckRecordTag(record, 1, Ps(2)).ok());
}

TEST_F(RecordTagTest, ARecordWithoutItsReceiversTagIsRefused) {
  Message record = Record();
  record.record_tags.erase(record.record_tags.begin() + 1);  // ps-2's
  const Status s = CheckRecordTag(record, 0, Ps(2));
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("record 7 of shard 0 (head: task 0) carries no tag for ps-2"),
            std::string::npos)
      << s.message();
  EXPECT_FALSE(CheckRecordTag(record, 7, Ps(1)).ok()) << "a head task without a key";
}

TEST_F(RecordTagTest, KeptPairKeysMakeTheTagsPairTagMakes) {
  const Message record = Record();
  const ClusterKeys head = Ps(0), tail = Ps(2);
  PairKeys head_pairs(head.own.secret_key), tail_pairs(tail.own.secret_key);
  for (int i = 0; i < 2; ++i) {  // a key made, then a key kept
    auto tags = TagRecord(record, head, &head_pairs);
    ASSERT_TRUE(tags.ok());
    ASSERT_EQ(tags->size(), record.record_tags.size());
    for (size_t t = 0; t < tags->size(); ++t) {
      EXPECT_TRUE(SameTag((*tags)[t].tag, record.record_tags[t].tag)) << (*tags)[t].name;
    }
    EXPECT_TRUE(CheckRecordTag(record, 0, tail, &tail_pairs).ok());
  }
  Message changed = record;
  changed.step += 1;
  EXPECT_FALSE(CheckRecordTag(changed, 0, tail, &tail_pairs).ok()) << "a kept key passes anything";
  auto direct = PairTag(head.own.secret_key, tail.own.public_key, "c", "m");
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(head_pairs.Tag(tail.own.public_key, "c", "m").value(), *direct);
}

TEST_F(RecordTagTest, PlaintextTagsNothingAndChecksNothing) {
  Message record = Record();
  record.record_tags.clear();
  auto tags = TagRecord(record, ClusterKeys{});
  ASSERT_TRUE(tags.ok());
  EXPECT_TRUE(tags->empty());
  EXPECT_TRUE(CheckRecordTag(record, 0, ClusterKeys{}).ok());
}

}  // namespace
}  // namespace wire
}  // namespace pstrain
