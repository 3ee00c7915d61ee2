// What a server does about faults of its peers, driven in-process through Handle(): retried
// pushes applied once, restarted workers told apart by incarnation, barriers counting each
// participant once, silent peers logged as missing. The real-process side (a server killed and
// restarted under running workers) is in tests/distributed/fault_test.py.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "common/wire/codec.h"
#include "common/wire/request.h"
#include "ps/server.h"
#include "tests/ps/server_test_util.h"

namespace pstrain {
namespace ps {
namespace {

using wire::Message;
using wire::MessageType;

std::unique_ptr<ParameterServer> MakeServer(UpdateMode mode, int workers, int accumulate_n = 0) {
  ServerOptions o;
  o.mode = mode;
  o.num_workers = workers;
  o.accumulate_n = accumulate_n;
  o.peer_timeout = std::chrono::milliseconds(1000);
  return InitializedSgdServer(o, {{"w", Tensor::Filled(Shape{2}, 10.0f)}}, 7);
}

// A push from worker `task` (process incarnation `incarnation`), its `sequence`-th to this server.
Message Push(int task, uint64_t incarnation, uint64_t sequence, float g, uint64_t id) {
  Message m = wire::Request(MessageType::kPush, "worker", task, incarnation);
  m.sequence = sequence;
  m.request_id = id;
  m.tensors.push_back({"w", Tensor::Filled(Shape{2}, g)});
  return m;
}

float Value(ParameterServer* server) { return server->store().Value("w")[0]; }

TEST(ServerFaultsTest, ARetriedPushIsAnsweredAgainButAppliedOnce) {
  auto server = MakeServer(UpdateMode::kAsync, 2);
  auto first = server->Handle("w1", Push(1, 100, 1, 1.0f, 5));
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].message.type, MessageType::kOk);
  EXPECT_FLOAT_EQ(Value(server.get()), 9.0f);
  // The same push again (its reply was lost), under a new request id and a new connection.
  auto retry = server->Handle("w1-reconnected", Push(1, 100, 1, 1.0f, 6));
  ASSERT_EQ(retry.size(), 1u);
  EXPECT_EQ(retry[0].peer, "w1-reconnected");
  EXPECT_EQ(retry[0].message.type, MessageType::kOk);
  EXPECT_EQ(retry[0].message.request_id, 6u);
  EXPECT_FLOAT_EQ(Value(server.get()), 9.0f);
  EXPECT_EQ(server->global_step(), 1);
  EXPECT_EQ(server->stats().duplicates, 1);
  // The next push is new and applies.
  server->Handle("w1", Push(1, 100, 2, 1.0f, 7));
  EXPECT_FLOAT_EQ(Value(server.get()), 8.0f);
}

TEST(ServerFaultsTest, ARestartedWorkerNumbersItsPushesAfreshAndIsApplied) {
  auto server = MakeServer(UpdateMode::kAsync, 2);
  server->Handle("w1", Push(1, 100, 1, 1.0f, 1));
  server->Handle("w1", Push(1, 100, 2, 1.0f, 2));
  // The process was killed and restarted: a new incarnation starts again at sequence 1.
  server->Handle("w1b", Push(1, 200, 1, 1.0f, 1));
  EXPECT_FLOAT_EQ(Value(server.get()), 7.0f);
  EXPECT_EQ(server->stats().duplicates, 0);
}

TEST(ServerFaultsTest, PushesFromTwoWorkersWithTheSameSequenceAreBothApplied) {
  auto server = MakeServer(UpdateMode::kAsync, 2);
  server->Handle("w0", Push(0, 100, 1, 1.0f, 1));
  server->Handle("w1", Push(1, 300, 1, 1.0f, 1));
  EXPECT_FLOAT_EQ(Value(server.get()), 8.0f);
}

TEST(ServerFaultsTest, AccumulateCountsARetriedPushOnce) {
  auto server = MakeServer(UpdateMode::kAccumulate, 2, /*accumulate_n=*/2);
  server->Handle("w0", Push(0, 100, 1, 2.0f, 1));
  server->Handle("w0", Push(0, 100, 1, 2.0f, 2));  // retried: must not complete the window
  EXPECT_EQ(server->global_step(), 0);
  server->Handle("w1", Push(1, 300, 1, 4.0f, 1));
  EXPECT_EQ(server->global_step(), 1);
  EXPECT_FLOAT_EQ(Value(server.get()), 7.0f);  // 10 - mean(2, 4)
}

TEST(ServerFaultsTest, SyncAnswersARetryOfAWaitingPushWithTheUpdate) {
  auto server = MakeServer(UpdateMode::kSync, 2);
  EXPECT_TRUE(server->Handle("w0", Push(0, 100, 1, 2.0f, 1)).empty());
  EXPECT_TRUE(server->Handle("w0-again", Push(0, 100, 1, 2.0f, 2)).empty());
  auto out = server->Handle("w1", Push(1, 300, 1, 4.0f, 1));
  EXPECT_EQ(out.size(), 3u);  // both pushes and the retry
  EXPECT_EQ(server->global_step(), 1);
  EXPECT_FLOAT_EQ(Value(server.get()), 7.0f);
}

TEST(ServerFaultsTest, ABarrierCountsAParticipantThatAsksTwiceOnce) {
  auto server = MakeServer(UpdateMode::kAsync, 2);
  Message b;
  b.type = MessageType::kBarrier;
  b.text = "done";
  b.value = 2;
  b.role = "worker";
  b.task_index = 1;
  EXPECT_TRUE(server->Handle("w1", b).empty());
  EXPECT_TRUE(server->Handle("w1-restarted", b).empty());  // still one participant
  b.task_index = 0;
  auto out = server->Handle("w0", b);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].peer, "w1-restarted");  // the live connection gets the answer
}

TEST(ServerFaultsTest, ASendersWaitsAreBoundedAndAWaitElsewhereCancelsNone) {
  auto server = MakeServer(UpdateMode::kAsync, 2);
  Message b;
  b.type = MessageType::kBarrier;
  b.value = 2;
  b.role = "worker";
  b.task_index = 1;
  b.text = "done";
  EXPECT_TRUE(server->Handle("w1", b).empty());
  int refused = 0;
  for (int i = 0; i < 1000; ++i) {  // a flood of barriers under new names
    b.text = "flood-" + std::to_string(i);
    auto out = server->Handle("w1", b);
    if (out.empty()) continue;
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].message.type, MessageType::kError);
    EXPECT_EQ(out[0].message.error_code, StatusCode::kResourceExhausted);
    ++refused;
  }
  EXPECT_EQ(refused, 1000 - (kMaxBarriersPerParticipant - 1));
  EXPECT_EQ(server->pending_requests(), static_cast<size_t>(kMaxBarriersPerParticipant))
      << "the server holds every barrier it was sent";
  b.text = "flood-0";  // a retry at a barrier it waits at replaces its wait there
  EXPECT_TRUE(server->Handle("w1", b).empty());
  EXPECT_EQ(server->pending_requests(), static_cast<size_t>(kMaxBarriersPerParticipant));
  b.text = "done";  // worker 1's wait at "done" outlived the flood
  b.task_index = 0;
  auto released = server->Handle("w0", b);
  ASSERT_EQ(released.size(), 2u);  // worker 1 and worker 0, nobody else
  for (const auto& o : released) EXPECT_EQ(o.message.type, MessageType::kOk);
  EXPECT_EQ(server->pending_requests(), static_cast<size_t>(kMaxBarriersPerParticipant - 1));
}

// A barrier request from `role` `task` that names `count` participants.
Message BarrierRequest(const std::string& role, int task, int64_t count) {
  Message b = wire::Request(MessageType::kBarrier, role, task);
  b.text = "done";
  b.value = count;
  return b;
}

std::unique_ptr<ParameterServer> MakeClusterServer(int workers, int evaluators) {
  ServerOptions o;
  o.num_workers = workers;
  o.cluster = {workers, evaluators};
  return SgdServer(o);
}

TEST(ServerFaultsTest, ABarrierWaitsForTheWholeClusterWhateverCountARequestNames) {
  auto server = MakeClusterServer(2, 1);
  // Worker 1 says the barrier is for one participant: it would be released at once, before
  // worker 0 (the chief) has finished, which then finds its servers shut down.
  auto out = server->Handle("w1", BarrierRequest("worker", 1, 1));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.type, MessageType::kError);
  EXPECT_EQ(out[0].message.error_code, StatusCode::kInvalidArgument);
  EXPECT_NE(out[0].message.text.find("waits for the cluster's 3 tasks, 2 worker(s) and 1 "
                                     "evaluator(s)"),
            std::string::npos)
      << out[0].message.text;
  EXPECT_NE(out[0].message.text.find("this request counts 1"), std::string::npos);
  EXPECT_EQ(server->pending_requests(), 0u);
  // Two of the three, with the right count, wait; the third releases all three.
  EXPECT_TRUE(server->Handle("w1", BarrierRequest("worker", 1, 3)).empty());
  EXPECT_TRUE(server->Handle("e0", BarrierRequest("evaluator", 0, 3)).empty());
  EXPECT_EQ(server->Handle("c0", BarrierRequest("chief", 0, 3)).size(), 3u);
  EXPECT_EQ(server->pending_requests(), 0u);
}

TEST(ServerFaultsTest, TheChiefAndWorkerZeroAreOneParticipantAtABarrier) {
  auto server = MakeClusterServer(2, 0);
  // Worker 0's key may name itself "chief 0" or "worker 0": still one process.
  EXPECT_TRUE(server->Handle("c0", BarrierRequest("chief", 0, 2)).empty());
  EXPECT_TRUE(server->Handle("w0", BarrierRequest("worker", 0, 2)).empty())
      << "worker 0 counted twice released the barrier without worker 1";
  auto out = server->Handle("w1", BarrierRequest("worker", 1, 2));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].peer, "w0");
  EXPECT_EQ(out[1].peer, "w1");
}

TEST(ServerFaultsTest, AnEvaluatorTheClusterDoesNotCountCannotReleaseABarrier) {
  auto server = MakeClusterServer(2, 0);
  EXPECT_TRUE(server->Handle("w0", BarrierRequest("chief", 0, 2)).empty());
  // One evaluator may always connect (to pull), but with --evaluators=0 none is waited for.
  auto out = server->Handle("e0", BarrierRequest("evaluator", 0, 2));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].peer, "e0");
  EXPECT_EQ(out[0].message.error_code, StatusCode::kPermissionDenied);
  EXPECT_NE(out[0].message.text.find("evaluator 0 is not one of them"), std::string::npos)
      << out[0].message.text;
  EXPECT_EQ(server->pending_requests(), 1u);
  EXPECT_EQ(server->Handle("w1", BarrierRequest("worker", 1, 2)).size(), 2u);
}

TEST(ServerFaultsTest, InSyncModeOnePullWaitsPerSender) {
  auto server = MakeServer(UpdateMode::kSync, 2);
  EXPECT_TRUE(server->Handle("w1", Push(1, 100, 1, 1.0f, 1)).empty());  // waits for worker 0
  Message pull = wire::Request(MessageType::kPull, "worker", 1, 100);
  for (uint64_t id = 2; id < 500; ++id) {
    pull.request_id = id;
    EXPECT_TRUE(server->Handle("w1", pull).empty());
  }
  EXPECT_EQ(server->pending_requests(), 2u);  // its push and its newest pull
  auto out = server->Handle("w0", Push(0, 200, 1, 3.0f, 1));
  ASSERT_EQ(out.size(), 3u);  // both pushes and worker 1's newest pull
  EXPECT_EQ(out[2].message.request_id, 499u);
}

TEST(ServerFaultsTest, ASilentPeerIsFoundMissingOnceAndNotAfterGoodbye) {
  auto server = MakeServer(UpdateMode::kAsync, 2);
  Message hb = wire::Request(MessageType::kHeartbeat, "worker", 1, 100);
  auto reply = server->Handle("w1", hb);
  ASSERT_EQ(reply.size(), 1u);
  EXPECT_EQ(reply[0].message.value, 1);  // initialised
  EXPECT_NE(reply[0].message.incarnation, 0u);
  const auto now = std::chrono::steady_clock::now();
  EXPECT_EQ(server->CheckPeers(now), 0);
  // Chief and worker 1 both silent past the timeout: found once each, not again.
  EXPECT_EQ(server->CheckPeers(now + std::chrono::seconds(2)), 2);
  EXPECT_EQ(server->CheckPeers(now + std::chrono::seconds(3)), 0);
  EXPECT_TRUE(server->peers().at("worker 1").missing);
  server->Handle("w1", hb);  // back
  EXPECT_FALSE(server->peers().at("worker 1").missing);
  hb.text = "goodbye";
  server->Handle("w1", hb);
  // The chief is still missing (already logged); worker 1 left: nobody new.
  EXPECT_EQ(server->CheckPeers(std::chrono::steady_clock::now() + std::chrono::seconds(5)), 0);
  EXPECT_TRUE(server->peers().at("worker 1").left);
  EXPECT_FALSE(server->peers().at("worker 1").missing);
}

// Uninitialized is the one code that makes a chief initialise a server again
// (worker/distributed/request_router.cc), so a server without variables answers with it alone.
TEST(ServerFaultsTest, RequestsBeforeInitialisationAreRefusedUninitialized) {
  auto config = ConfigNode::Parse("{optimizer: {type: sgd}, learning_rate: {initial: 1.0}}", "t");
  ParameterServer server(ServerOptions{}, VariableStore::FromConfig(*config).value());
  Message pull = wire::Request(MessageType::kPull, "worker", 1, 100);
  Message checkpoint = pull;
  checkpoint.type = MessageType::kCheckpoint;
  checkpoint.role = "chief";
  checkpoint.task_index = 0;
  checkpoint.text = "/nonexistent";
  for (const Message& request : {Push(1, 100, 1, 1.0f, 1), pull, checkpoint}) {
    auto out = server.Handle("w1", request);
    ASSERT_EQ(out.size(), 1u) << wire::MessageTypeName(request.type);
    EXPECT_EQ(out[0].message.error_code, StatusCode::kUninitialized) << out[0].message.text;
    EXPECT_NE(out[0].message.text.find("not initialised"), std::string::npos)
        << out[0].message.text;
  }
}

// A server without a chain (no --replicas) answers each replication request, authorised and well
// formed, by saying replication is off, and changes nothing: no variable, slot, step, peer or
// held request.
TEST(ServerFaultsTest, AReplicationRequestIsRefusedWhileReplicationIsOffAndChangesNothing) {
  auto server = MakeServer(UpdateMode::kAsync, 2);
  ASSERT_EQ(server->Handle("w1", Push(1, 100, 1, 1.0f, 1)).at(0).message.type, MessageType::kOk);
  const std::string value_before(reinterpret_cast<const char*>(server->store().Value("w").data()),
                                 server->store().Value("w").bytes());
  const int64_t step_before = server->global_step();
  const std::set<std::string> peers_before = [&] {
    std::set<std::string> names;
    for (const auto& [who, state] : server->peers()) names.insert(who);
    return names;
  }();

  Message record = wire::Request(MessageType::kReplicate, "ps", 0, 3);
  record.shard = 0;
  record.map_epoch = 1;
  record.sequence = static_cast<uint64_t>(step_before) + 1;
  record.step = step_before;
  record.tensors = {{"w", Tensor::Filled(Shape{2}, 5.0f)}};
  record.pushes = {{"worker", 1, 100, 2, step_before + 1, 0, ""}};
  Message copy = record;
  copy.type = MessageType::kReplicaCopy;
  copy.step = 0;
  copy.tensors = {{"w", Tensor::Filled(Shape{2}, -3.0f)}};
  Message set_map = wire::Request(MessageType::kShardMap, "chief", 0);
  set_map.map_epoch = 2;
  set_map.chains = {{0, {0}, {}}};
  Message get_map = set_map;
  get_map.role = "worker";
  get_map.task_index = 1;
  get_map.chains.clear();
  Message lease = wire::Request(MessageType::kDataLease, "worker", 1, 100);
  lease.value = 1;
  struct Case {
    Message request;
    std::string identity;
  };
  for (const Case& c : std::vector<Case>{
           {record, "ps-0"}, {copy, "ps-0"}, {set_map, "worker-0"}, {get_map, ""}, {lease, ""}}) {
    const std::string type = wire::MessageTypeName(c.request.type);
    auto out = server->Handle("peer", c.request, c.identity);
    ASSERT_EQ(out.size(), 1u) << type;
    EXPECT_EQ(out[0].peer, "peer");
    EXPECT_EQ(out[0].message.type, MessageType::kError) << type;
    EXPECT_EQ(out[0].message.error_code, StatusCode::kFailedPrecondition) << out[0].message.text;
    EXPECT_NE(
        out[0].message.text.find("replication is not enabled on this server; it takes no " + type),
        std::string::npos)
        << out[0].message.text;
  }
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(server->store().Value("w").data()),
                        server->store().Value("w").bytes()),
            value_before);
  EXPECT_EQ(server->global_step(), step_before);
  std::set<std::string> peers_after;
  for (const auto& [who, state] : server->peers()) peers_after.insert(who);
  EXPECT_EQ(peers_after, peers_before) << "a refused sender is not a peer";
  EXPECT_EQ(server->peers().at("worker 1").last_push_sequence, 1u)
      << "the record's retry-cache entry was not installed";
  EXPECT_EQ(server->pending_requests(), 0u);
  // A malformed one never reaches a server: its struct on the wire has no place for the field,
  // and Encode refuses it by name.
  record.root = 1;
  Result<wire::EncodedMessage> encoded = wire::Encode(record);
  ASSERT_FALSE(encoded.ok());
  EXPECT_EQ(encoded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(encoded.status().message().find("a replicate carries no 'root'"), std::string::npos)
      << encoded.status().message();
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
