// Hostile servers against a real replica of a shard's chain (pstrain --job_name=ps --replicas
// --curve_keys): the test speaks for the chief and for the replica's predecessor over real CURVE
// connections, copies the shard to it, then sends records. A forger with the predecessor's key
// who has not seen the chain (its link) and a middle replica that alters what it forwards (the
// head's tags) are refused; nothing they sent changes the replica's values, and the real
// records after them are taken.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/wire/chain_link.h"
#include "common/wire/curve.h"
#include "common/wire/record_tag.h"
#include "common/wire/request.h"
#include "common/wire/transport.h"
#include "ps/state_digest.h"
#include "tests/distributed/curve_server_process.h"

namespace pstrain {
namespace {

using std::chrono::milliseconds;
using testing::CurveServerProcess;
using wire::Message;
using wire::MessageType;

// The real server is the last of `servers` ps tasks; shard 0's chain ends with it.
class ReplicaUnderTest {
 public:
  ReplicaUnderTest(const std::string& name, int servers)
      : ps_(name, 0, servers), last_(servers - 1) {
    std::string hosts;
    for (int t = 0; t < servers; ++t) {
      const int port = t == last_ ? ps_.port() : testing::PickPort();
      hosts += (t ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(port);
    }
    ps_.Start(ps_.keys() + "/ps-" + std::to_string(last_),
              {"--task_index=" + std::to_string(last_), "--replicas=" + std::to_string(last_),
               "--ps_hosts=" + hosts});
    chief_ = Open("worker", 0);
  }
  CurveServerProcess& process() { return ps_; }
  wire::ClusterKeys Keys(const std::string& job, int task) {
    auto keys =
        wire::LoadClusterKeys(ps_.keys() + "/" + job + "-" + std::to_string(task), job, task);
    CHECK(keys.ok()) << keys.status().ToString();
    return std::move(keys).value();
  }
  // A connection to the real server with `job` `task`'s keys.
  std::unique_ptr<wire::Connection> Open(const std::string& job, int task) {
    auto c =
        wire::Connection::Connect(ps_.endpoint(), {}, Keys(job, task).ForClientOf(last_).value());
    CHECK(c.ok()) << c.status().ToString();
    return std::move(c).value();
  }
  // The chief sets shard 0's chain (shard 1 stays the real server's own).
  void SetMap(uint64_t epoch, std::vector<int> tasks, std::vector<int> joining) {
    Message map = wire::Request(MessageType::kShardMap, "chief", 0, wire::ProcessIncarnation());
    map.map_epoch = epoch;
    map.chains = {{0, tasks, joining}};
    for (int s = 1; s <= last_; ++s) map.chains.push_back({s, {last_}, {}});
    for (int i = 0;; ++i) {
      auto r = chief_->Call(map, milliseconds(500));
      if (r.ok()) break;
      ASSERT_TRUE(r.status().code() == StatusCode::kUnavailable && i < 40) << r.status().ToString();
    }
  }
  // `from`'s copy of shard 0 at record `record` and that step (weights all `weight`, under
  // `link`), made with the server's own fingerprint (its refusal of a copy names it), sent under
  // map epoch 1.
  void Copy(wire::Connection* from, int from_task, const std::string& link, float weight = 1.0f,
            uint64_t record = 0) {
    Message copy =
        wire::Request(MessageType::kReplicaCopy, "ps", from_task, wire::ProcessIncarnation());
    copy.shard = 0;
    copy.map_epoch = 1;
    copy.link = link;
    copy.sequence = record;
    copy.value = static_cast<int64_t>(record);
    copy.tensors.push_back({"fc/weights", Tensor::Filled(Shape{2, 4}, weight)});
    copy.text = "?";
    auto refused = from->Call(copy, milliseconds(5000));
    ASSERT_FALSE(refused.ok());
    const std::string why = refused.status().message();
    const size_t begin = why.find("this server '") + 13, end = why.find("'; replicas");
    ASSERT_TRUE(begin > 13 && end != std::string::npos && end > begin) << why;
    copy.text = why.substr(begin, end - begin);
    auto installed = from->Call(copy, milliseconds(5000));
    ASSERT_TRUE(installed.ok()) << installed.status().ToString();
  }
  // The joiners the real server lists as caught up with shard 0 in its shardMap get reply.
  std::vector<int> CaughtUp() {
    Message get = wire::Request(MessageType::kShardMap, "chief", 0, wire::ProcessIncarnation());
    auto reply = chief_->Call(get, milliseconds(5000));
    EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    if (!reply.ok()) return {};
    for (const wire::Chain& c : reply->caught_up) {
      if (c.shard == 0) return c.tasks;
    }
    return {};
  }
  // Makes the real server shard 0's head, then pulls its weights as the chief.
  Message PullAsHead(uint64_t epoch) {
    SetMap(epoch, {last_}, {});
    Message pull = wire::Request(MessageType::kPull, "chief", 0, wire::ProcessIncarnation());
    pull.shard = 0;
    pull.names = {"fc/weights"};
    auto values = chief_->Call(pull, milliseconds(5000));
    EXPECT_TRUE(values.ok()) << values.status().ToString();
    return values.ok() ? *values : Message{};
  }

 private:
  CurveServerProcess ps_;
  int last_;
  std::unique_ptr<wire::Connection> chief_;
};

// A server's key used from elsewhere: ps-1 is the tail of shard 0's chain behind ps-0. The
// test speaks for the real ps-0 (its copy, then its records) and, over another connection with
// ps-0's key, for a forger who has not seen the chain's copy. The forger's records carry the
// right sender and sequence, but not the chain's link: they are refused and change nothing,
// and the real records after them are taken (the backup used to apply the forged one, then
// take the real one for a resend, diverge and refuse every later record).
TEST(HostileReplicaTest, ARecordForgedWithThePredecessorsKeyChangesNothing) {
  ReplicaUnderTest replica("forged_record", /*servers=*/2);
  auto predecessor = replica.Open("ps", 0);
  auto forger = replica.Open("ps", 0);
  const wire::ClusterKeys head = replica.Keys("ps", 0);
  replica.SetMap(1, {0}, {1});  // ps-1 joins shard 0 behind ps-0
  const std::string link = wire::NewChainLink();
  replica.Copy(predecessor.get(), 0, link);
  replica.SetMap(2, {0, 1}, {});  // now ps-1 is the tail, ps-0 its predecessor

  Message real = wire::Request(MessageType::kReplicate, "ps", 0, wire::ProcessIncarnation());
  real.shard = 0;
  real.map_epoch = 2;
  real.made_epoch = 2;
  real.link = link;
  for (uint64_t sequence = 1; sequence <= 2; ++sequence) {
    Message forged = real;
    forged.sequence = sequence;
    forged.value = static_cast<int64_t>(sequence);
    forged.tensors = {{"fc/weights", Tensor::Filled(Shape{2, 4}, 1000.0f)}};
    for (const std::string& guess : {wire::NewChainLink(), std::string()}) {
      forged.link = guess;
      forged.record_tags = wire::TagRecord(forged, head).value();  // the key is stolen
      auto r = forger->Call(forged, milliseconds(5000));
      ASSERT_FALSE(r.ok()) << "forged record " << sequence << " was taken";
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
      EXPECT_NE(r.status().message().find("does not follow the records this replica of shard 0"),
                std::string::npos)
          << r.status().ToString();
    }
    // The real ps-0's record, a zero gradient: the step moves, the weights do not.
    real.sequence = sequence;
    real.value = static_cast<int64_t>(sequence);
    real.tensors = {{"fc/weights", Tensor::Filled(Shape{2, 4}, 0.0f)}};
    real.record_tags = wire::TagRecord(real, head).value();
    auto taken = predecessor->Call(real, milliseconds(5000));
    ASSERT_TRUE(taken.ok()) << "real record " << sequence << ": " << taken.status().ToString();
    EXPECT_EQ(taken->sequence, sequence) << "acknowledged up to it";
    real.link = wire::NextChainLink(real.link, real);
  }

  // ps-1 takes over as head: it serves the chief what the real records made.
  const Message values = replica.PullAsHead(3);
  EXPECT_EQ(values.step, 2);
  ASSERT_EQ(values.tensors.size(), 1u);
  for (int64_t i = 0; i < 8; ++i) {
    EXPECT_FLOAT_EQ(values.tensors.at(0).tensor[i], 1.0f) << "a forged record moved the weights";
  }
  EXPECT_TRUE(replica.process().Alive());
}

// A middle replica's key: shard 0's chain is [ps-0, ps-1, ps-2], the real server ps-2 its tail.
// The test makes the head's records (tagged with ps-0's key, as a head tags them) and forwards
// them as ps-1, first altered: a tensor's bytes changed with the head's tags kept, the tags
// dropped, or tags that ps-1's own key made. Each is refused, naming the shard, the record and
// the head, and the real record after it is taken: the tail ends with the head's values.
TEST(HostileReplicaTest, AMiddleReplicaThatAltersARecordIsRefusedByTheTail) {
  ReplicaUnderTest replica("altered_record", /*servers=*/3);
  auto middle = replica.Open("ps", 1);
  const wire::ClusterKeys head = replica.Keys("ps", 0), own = replica.Keys("ps", 1);
  replica.SetMap(1, {0, 1}, {2});  // ps-2 joins behind the tail ps-1, which copies to it
  Message real = wire::Request(MessageType::kReplicate, "ps", 1, wire::ProcessIncarnation());
  real.link = wire::NewChainLink();
  replica.Copy(middle.get(), 1, real.link);
  replica.SetMap(2, {0, 1, 2}, {});
  real.shard = 0;
  real.map_epoch = 2;
  real.made_epoch = 2;  // the head made its records under map 2
  for (uint64_t sequence = 1; sequence <= 3; ++sequence) {
    real.sequence = sequence;
    real.value = static_cast<int64_t>(sequence);
    real.tensors = {{"fc/weights", Tensor::Filled(Shape{2, 4}, 0.0f)}};
    real.record_tags = wire::TagRecord(real, head).value();
    Message altered = real;
    switch (sequence) {
      case 1:  // one float of the gradient changed on the way
        altered.tensors = {{"fc/weights", Tensor::Filled(Shape{2, 4}, 0.0f)}};
        altered.tensors[0].tensor.data()[3] = -1000.0f;
        break;
      case 2:
        altered.tensors = {{"fc/weights", Tensor::Filled(Shape{2, 4}, -1000.0f)}};
        altered.record_tags.clear();
        break;
      default:
        altered.tensors = {{"fc/weights", Tensor::Filled(Shape{2, 4}, -1000.0f)}};
        altered.record_tags = wire::TagRecord(altered, own).value();
    }
    auto r = middle->Call(altered, milliseconds(5000));
    ASSERT_FALSE(r.ok()) << "altered record " << sequence << " was taken";
    EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied) << r.status().ToString();
    const std::string named = "record " + std::to_string(sequence) + " of shard 0 (head: task 0)";
    EXPECT_NE(r.status().message().find(named), std::string::npos) << r.status().ToString();
    auto taken = middle->Call(real, milliseconds(5000));
    ASSERT_TRUE(taken.ok()) << "real record " << sequence << ": " << taken.status().ToString();
    EXPECT_EQ(taken->sequence, sequence) << "acknowledged up to it";
    real.link = wire::NextChainLink(real.link, real);
  }
  EXPECT_TRUE(replica.process().LogHas("of shard 0 (head: task 0) carries a tag for ps-2 that"));

  // The tail takes over as head: it holds what the head's records made, nothing altered.
  const Message values = replica.PullAsHead(3);
  EXPECT_EQ(values.step, 3);
  ASSERT_EQ(values.tensors.size(), 1u);
  for (int64_t i = 0; i < 8; ++i) {
    EXPECT_FLOAT_EQ(values.tensors.at(0).tensor[i], 1.0f) << "an altered record moved weight " << i;
  }
  EXPECT_TRUE(replica.process().Alive());
}

// A tail's key: shard 0's chain is [ps-0, ps-1] and the real server ps-2 joins behind the tail
// ps-1. The test makes the head's records (tagged with ps-0's key) and speaks for ps-1: it
// copies the shard with altered weights, then forwards a record the head stamped with its
// state's digest. The joiner finds its copy wrong at that stamp and drops it, naming the shard,
// the record and the task that sent the copy, and refuses what follows until a new copy; an
// honest copy is then acknowledged no further than itself until the next stamp verifies it (only
// then does the joiner tell the chief so), and the joiner, made head, serves the head's values.
TEST(HostileReplicaTest, AJoinerDropsATailsAlteredCopyAtTheHeadsNextStamp) {
  ReplicaUnderTest replica("altered_copy", /*servers=*/3);
  auto tail = replica.Open("ps", 1);
  const wire::ClusterKeys head = replica.Keys("ps", 0);
  replica.SetMap(1, {0, 1}, {2});
  Message record = wire::Request(MessageType::kReplicate, "ps", 1, wire::ProcessIncarnation());
  record.shard = 0;
  record.map_epoch = 1;
  record.made_epoch = 1;
  record.link = wire::NewChainLink();
  auto send = [&](uint64_t sequence, bool stamped) {
    record.sequence = sequence;
    record.value = static_cast<int64_t>(sequence);
    record.tensors = {{"fc/weights", Tensor::Filled(Shape{2, 4}, 0.0f)}};  // the weights stay 1
    record.state_digest.clear();
    if (stamped) {
      record.state_digest = ps::StateBlake2b({{"fc/weights", Tensor::Filled(Shape{2, 4}, 1.0f)}},
                                             static_cast<int64_t>(sequence));
    }
    record.record_tags = wire::TagRecord(record, head).value();
    auto r = tail->Call(record, milliseconds(5000));
    record.link = wire::NextChainLink(record.link, record);
    return r;
  };
  replica.Copy(tail.get(), 1, record.link, /*weight=*/5.0f);  // the head holds 1.0
  auto refused = send(1, /*stamped=*/true);
  ASSERT_FALSE(refused.ok()) << "a copy unlike the head's state was kept";
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("has no copy yet"), std::string::npos)
      << refused.status().ToString();
  EXPECT_TRUE(replica.process().LogHas(
      "shard 0: the copy of task 1 at record 0 differs from the head's stamp at record 1 "
      "(forged or broken): dropped"));
  auto after = send(2, /*stamped=*/false);
  ASSERT_FALSE(after.ok()) << "a record was applied to a dropped copy";
  EXPECT_NE(after.status().message().find("has no copy yet"), std::string::npos)
      << after.status().ToString();

  replica.Copy(tail.get(), 1, record.link, /*weight=*/1.0f, /*record=*/2);  // the honest one
  auto unverified = send(3, /*stamped=*/false);
  ASSERT_TRUE(unverified.ok()) << unverified.status().ToString();
  EXPECT_EQ(unverified->sequence, 2u) << "an unverified joiner acknowledged past its copy";
  EXPECT_TRUE(replica.CaughtUp().empty()) << "it told the chief its copy was verified";
  auto verified = send(4, /*stamped=*/true);
  ASSERT_TRUE(verified.ok()) << verified.status().ToString();
  EXPECT_EQ(verified->sequence, 4u) << "verified, it acknowledges what it holds";
  EXPECT_EQ(replica.CaughtUp(), std::vector<int>{2}) << "its own word, which the chief needs";
  EXPECT_TRUE(replica.process().LogHas(
      "shard 0: the copy of task 1 at record 2 verified by the head's stamp at record 4"));

  const Message values = replica.PullAsHead(2);
  EXPECT_EQ(values.step, 4);
  ASSERT_EQ(values.tensors.size(), 1u);
  for (int64_t i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(values.tensors.at(0).tensor[i], 1.0f);
  EXPECT_TRUE(replica.process().Alive());
}

}  // namespace
}  // namespace pstrain
