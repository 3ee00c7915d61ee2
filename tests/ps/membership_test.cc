// Workers joining and leaving (--min_workers, ps/membership.h), driven in-process through
// ParameterServer::Handle and CheckMembership as tests/ps/server_test.cc drives the update modes.
// A worker leaves by its goodbye heartbeat, or goes silent past a short peer timeout.
#include "ps/membership.h"

#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "common/wire/request.h"
#include "ps/server.h"
#include "tests/captured_log.h"
#include "tests/ps/server_test_util.h"

namespace pstrain {
namespace ps {
namespace {

using wire::Message;
using wire::MessageType;
using Clock = std::chrono::steady_clock;

struct Elastic {
  UpdateMode mode = UpdateMode::kSync;
  int workers = 2;  // --worker_hosts
  int min_workers = 1;
  int max_workers = 4;
  int evaluators = 0;
  std::chrono::milliseconds peer_timeout{5000};
  bool one_push_per_pull = false;
};

// A server initialised by the chief (which is then live as worker 0).
std::unique_ptr<ParameterServer> MakeServer(const Elastic& e) {
  ServerOptions o;
  o.mode = e.mode;
  o.num_workers = e.workers;
  o.min_workers = e.min_workers;
  o.cluster = {e.min_workers > 0 ? e.max_workers : e.workers, e.evaluators};
  o.peer_timeout = e.peer_timeout;
  o.one_push_per_pull = e.one_push_per_pull;
  return InitializedSgdServer(o, {{"w", Tensor::Filled(Shape{3}, 10.0f)}});
}

// Each server has its own senders' sequence numbers.
class Senders {
 public:
  explicit Senders(ParameterServer* server) : server_(server) {}
  std::vector<ParameterServer::Outgoing> Send(int task, Message m) {
    m.role = "worker";
    m.task_index = task;
    m.incarnation = 1;
    m.request_id = ++request_id_;
    if (m.type == MessageType::kPush) m.sequence = ++sequence_[task];
    return server_->Handle("w" + std::to_string(task), m);
  }
  std::vector<ParameterServer::Outgoing> Push(int task, float g) {
    Message m;
    m.type = MessageType::kPush;
    m.step = server_->global_step();
    m.tensors.push_back({"w", Tensor::Filled(Shape{3}, g)});
    return Send(task, m);
  }
  std::vector<ParameterServer::Outgoing> Heartbeat(int task, const std::string& text = "") {
    Message m;
    m.type = MessageType::kHeartbeat;
    m.text = text;
    return Send(task, m);
  }
  std::vector<ParameterServer::Outgoing> Barrier(int task, int64_t count) {
    Message m;
    m.type = MessageType::kBarrier;
    m.text = "done";
    m.value = count;
    return Send(task, m);
  }

 private:
  ParameterServer* server_;
  std::map<int, uint64_t> sequence_;
  uint64_t request_id_ = 0;
};

int Count(const std::vector<ParameterServer::Outgoing>& out, const std::string& peer) {
  int n = 0;
  for (const auto& o : out) n += o.peer == peer ? 1 : 0;
  return n;
}

TEST(MembershipTest, ASyncWindowClosesWhenAWorkerLeaves) {
  auto server = MakeServer({});
  Senders w(server.get());
  for (int t : {0, 1, 2}) w.Heartbeat(t);  // three live workers
  EXPECT_TRUE(w.Push(0, 1.0f).empty());
  EXPECT_TRUE(w.Push(1, 3.0f).empty());  // the window waits for worker 2
  EXPECT_TRUE(server->CheckMembership(Clock::now()).empty());
  EXPECT_EQ(server->global_step(), 0);
  w.Heartbeat(2, "goodbye");
  auto out = server->CheckMembership(Clock::now());
  EXPECT_EQ(server->global_step(), 1);
  EXPECT_EQ(Count(out, "w0"), 1);
  EXPECT_EQ(Count(out, "w1"), 1);
  EXPECT_EQ(server->pending_requests(), 0u);
  // The mean of the two pushes that came: 10 - mean(1, 3).
  Message pull;
  pull.type = MessageType::kPull;
  auto reply = w.Send(0, pull);
  ASSERT_EQ(reply.size(), 1u);
  EXPECT_FLOAT_EQ(reply[0].message.tensors[0].tensor[0], 8.0f);
}

TEST(MembershipTest, ASilentWorkerClosesTheWindowAfterThePeerTimeout) {
  Elastic e;
  e.peer_timeout = std::chrono::milliseconds(200);
  auto server = MakeServer(e);
  Senders w(server.get());
  for (int t : {0, 1, 2}) w.Heartbeat(t);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(w.Push(0, 1.0f).empty());  // members: 0 and 1 spoke again; 2 is only late yet
  EXPECT_TRUE(w.Push(1, 1.0f).empty());
  auto out = server->CheckMembership(Clock::now());  // now 2 is found missing
  EXPECT_EQ(server->global_step(), 1);
  EXPECT_EQ(out.size(), 2u);
}

TEST(MembershipTest, AJoiningWorkerCountsFromTheNextWindow) {
  auto server = MakeServer({});
  Senders w(server.get());
  for (int t : {0, 1}) w.Heartbeat(t);
  EXPECT_TRUE(w.Push(0, 1.0f).empty());  // the window opens with workers 0 and 1
  w.Heartbeat(2);                        // worker 2 joins while it is open
  EXPECT_TRUE(server->CheckMembership(Clock::now()).empty());
  auto out = w.Push(1, 1.0f);  // closes it: 2 is not one of its members
  EXPECT_EQ(out.size(), 2u);
  EXPECT_EQ(server->global_step(), 1);
  // The next window needs all three.
  EXPECT_TRUE(w.Push(0, 1.0f).empty());
  EXPECT_TRUE(w.Push(1, 1.0f).empty());
  EXPECT_EQ(server->global_step(), 1);
  EXPECT_EQ(w.Push(2, 1.0f).size(), 3u);
  EXPECT_EQ(server->global_step(), 2);
}

TEST(MembershipTest, BelowMinWorkersNothingIsAppliedAndTheServerSaysWhy) {
  Elastic e;
  e.mode = UpdateMode::kAsync;
  e.min_workers = 2;
  e.peer_timeout = std::chrono::milliseconds(200);
  auto server = MakeServer(e);
  Senders w(server.get());
  w.Heartbeat(2);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  w.Heartbeat(0);
  testing::CapturedLog log;
  server->CheckMembership(Clock::now());  // worker 2 (and the chief's register) gone silent
  const std::string line = log.Find({"waits: 1 live worker, --min_workers=2 (worker 2 silent"});
  EXPECT_NE(line, "") << log.All();
  EXPECT_NE(line.find("ps 0: shard 0 waits"), std::string::npos) << line;
  // An async push is held, neither applied nor answered.
  EXPECT_TRUE(w.Push(0, 1.0f).empty());
  EXPECT_EQ(server->global_step(), 0);
  EXPECT_EQ(server->pending_requests(), 1u);
  EXPECT_TRUE(server->CheckMembership(Clock::now()).empty());
  // Said again only after 10 s.
  EXPECT_EQ(log.All().find("waits:"), log.All().rfind("waits:"));
  // A second worker: the held push is applied and answered.
  w.Heartbeat(1);
  auto out = server->CheckMembership(Clock::now());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].peer, "w0");
  EXPECT_EQ(out[0].message.type, MessageType::kOk);
  EXPECT_EQ(server->global_step(), 1);
  EXPECT_EQ(server->pending_requests(), 0u);
}

TEST(MembershipTest, AHeldPushIsAppliedOnceHoweverOftenItIsRetried) {
  Elastic e;
  e.mode = UpdateMode::kAsync;
  e.min_workers = 2;
  auto server = MakeServer(e);
  Message push = wire::Request(MessageType::kPush, "worker", 0, 1);
  push.sequence = 1;
  push.tensors.push_back({"w", Tensor::Filled(Shape{3}, 1.0f)});
  EXPECT_TRUE(server->Handle("first", push).empty());
  EXPECT_TRUE(server->Handle("retry", push).empty());
  EXPECT_EQ(server->pending_requests(), 1u);
  // One that skips ahead of the held one is refused at once, naming both.
  Message skip = push;
  skip.sequence = 3;
  auto out = server->Handle("skip", skip);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.type, MessageType::kError);
  EXPECT_NE(out[0].message.text.find("push 3 from worker 0 does not follow push 1"),
            std::string::npos)
      << out[0].message.text;
  Senders(server.get()).Heartbeat(1);
  out = server->CheckMembership(Clock::now());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].peer, "retry");
  EXPECT_EQ(server->global_step(), 1);
  Message pull = wire::Request(MessageType::kPull, "worker", 1, 1);
  out = server->Handle("w1", pull);
  EXPECT_FLOAT_EQ(out[0].message.tensors[0].tensor[0], 9.0f);  // applied once: 10 - 1
}

// A worker's client that times out resends its push while the server still holds the first copy
// below --min_workers: the retry races its original through one step per pull, which lets it in
// as the retry it is (not a second step on one pull); the push is applied once, answered on the
// retry's connection, and a new step on the same pull is still refused.
TEST(MembershipTest, ARetryRacingItsHeldPushPassesOneStepPerPullAndIsAppliedOnce) {
  Elastic e;
  e.mode = UpdateMode::kAsync;
  e.min_workers = 2;
  e.one_push_per_pull = true;
  auto server = MakeServer(e);
  auto out = server->Handle("first", wire::Request(MessageType::kPull, "worker", 0, 1));
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].message.type, MessageType::kOk) << out[0].message.text;
  Message push = wire::Request(MessageType::kPush, "worker", 0, 1);
  push.sequence = 1;
  push.tensors.push_back({"w", Tensor::Filled(Shape{3}, 1.0f)});
  EXPECT_TRUE(server->Handle("first", push).empty()) << "held: one live worker of 2";
  out = server->Handle("retry", push);
  EXPECT_TRUE(out.empty()) << "the retry was refused: " << out[0].message.text;
  Message next = push;
  next.sequence = 2;
  out = server->Handle("next", next);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.error_code, StatusCode::kPermissionDenied);
  EXPECT_NE(out[0].message.text.find("one step per pull"), std::string::npos)
      << out[0].message.text;
  EXPECT_EQ(server->pending_requests(), 1u);
  Senders(server.get()).Heartbeat(1);
  out = server->CheckMembership(Clock::now());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].peer, "retry");
  EXPECT_EQ(out[0].message.type, MessageType::kOk);
  EXPECT_EQ(server->global_step(), 1);
  out = server->Handle("w1", wire::Request(MessageType::kPull, "worker", 1, 1));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FLOAT_EQ(out[0].message.tensors.at(0).tensor[0], 9.0f) << "applied once: 10 - 1";
}

TEST(MembershipTest, BelowMinWorkersASyncWindowStaysOpen) {
  Elastic e;
  e.min_workers = 2;
  auto server = MakeServer(e);
  Senders w(server.get());
  for (int t : {0, 1}) w.Heartbeat(t);
  EXPECT_TRUE(w.Push(0, 1.0f).empty());
  w.Heartbeat(1, "goodbye");  // one live worker left, below the minimum
  EXPECT_TRUE(server->CheckMembership(Clock::now()).empty());
  EXPECT_EQ(server->global_step(), 0);
  w.Heartbeat(2);  // a second worker: the window (whose members have all pushed) closes
  EXPECT_EQ(server->CheckMembership(Clock::now()).size(), 1u);
  EXPECT_EQ(server->global_step(), 1);
}

TEST(MembershipTest, ADoneBarrierCountsLiveWorkers) {
  Elastic e;
  e.mode = UpdateMode::kAsync;
  e.evaluators = 1;
  auto server = MakeServer(e);
  Senders w(server.get());
  for (int t : {0, 1, 2}) w.Heartbeat(t);
  // The request's count is a worker's own --worker_hosts + --evaluators: not trusted.
  EXPECT_TRUE(w.Barrier(0, 3).empty());
  EXPECT_TRUE(w.Barrier(1, 3).empty());
  Message eval;
  eval.type = MessageType::kBarrier;
  eval.text = "done";
  eval.value = 3;
  eval.role = "evaluator";
  eval.task_index = 0;
  eval.incarnation = 1;
  EXPECT_TRUE(server->Handle("e0", eval).empty());  // worker 2 still trains
  w.Heartbeat(2, "goodbye");
  auto out = server->CheckMembership(Clock::now());
  EXPECT_EQ(out.size(), 3u);
  EXPECT_EQ(Count(out, "e0"), 1);
  EXPECT_EQ(server->pending_requests(), 0u);
}

TEST(MembershipTest, ATaskIndexUpToMaxWorkersIsLetIn) {
  auto server = MakeServer({});  // 2 --worker_hosts, --max_workers=4
  Senders w(server.get());
  auto out = w.Heartbeat(3);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.type, MessageType::kOk);
  out = w.Heartbeat(4);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.type, MessageType::kError);
  EXPECT_NE(out[0].message.text.find("4 worker task(s)"), std::string::npos) << out[0].message.text;
}

TEST(MembershipTest, WithMinWorkersZeroTheWindowIsTodays) {
  Elastic e;
  e.min_workers = 0;
  e.workers = 3;
  auto server = MakeServer(e);
  Senders w(server.get());
  for (int t : {0, 1, 2}) w.Heartbeat(t);
  EXPECT_TRUE(w.Push(0, 1.0f).empty());
  EXPECT_TRUE(w.Push(1, 1.0f).empty());
  w.Heartbeat(2, "goodbye");  // the fixed N still waits for three pushes
  EXPECT_TRUE(server->CheckMembership(Clock::now() + std::chrono::seconds(60)).empty());
  EXPECT_EQ(server->global_step(), 0);
  EXPECT_EQ(w.Push(2, 1.0f).size(), 3u);
  EXPECT_EQ(server->global_step(), 1);
  // The barrier wants its count to be the cluster's.
  auto out = w.Barrier(0, 2);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.type, MessageType::kError);
}

TEST(MembershipTest, AccumulateNFollowsTheLiveWorkers) {
  Elastic e;
  e.mode = UpdateMode::kAccumulate;
  auto server = MakeServer(e);
  Senders w(server.get());
  for (int t : {0, 1, 2}) w.Heartbeat(t);
  w.Push(0, 1.0f);
  w.Push(1, 1.0f);
  EXPECT_EQ(server->global_step(), 0);
  w.Push(2, 1.0f);
  EXPECT_EQ(server->global_step(), 1);
  w.Heartbeat(2, "goodbye");
  w.Push(0, 1.0f);
  w.Push(1, 1.0f);
  EXPECT_EQ(server->global_step(), 2);
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
