// The server's update modes, driven in-process through Handle() (the network path is covered
// by tests/distributed).
#include "ps/server.h"

#include <gtest/gtest.h>

#include <map>

#include "tests/ps/server_test_util.h"

namespace pstrain {
namespace ps {
namespace {

using wire::Message;
using wire::MessageType;

std::unique_ptr<ParameterServer> MakeServer(UpdateMode mode, int workers, int backup = 0) {
  ServerOptions o;
  o.mode = mode;
  o.num_workers = workers;
  o.backup_workers = backup;
  return InitializedSgdServer(o, {{"w", Tensor::Filled(Shape{3}, 10.0f)}});
}

Message Push(int64_t step, float g, uint64_t id) {
  Message m;
  m.type = MessageType::kPush;
  m.request_id = id;
  m.step = step;
  m.tensors.push_back({"w", Tensor::Filled(Shape{3}, g)});
  return m;
}

// Sends `m` to `server` as worker `task` would ("w<task>"): with its role, task index, process
// incarnation and, for a push, its next sequence number.
std::vector<ParameterServer::Outgoing> Send(ParameterServer* server, int task, Message m) {
  static std::map<int, uint64_t> sequence;
  m.role = "worker";
  m.task_index = task;
  m.incarnation = 1;
  if (m.type == MessageType::kPush) m.sequence = ++sequence[task];
  return server->Handle("w" + std::to_string(task), m);
}

Message Pull(uint64_t id) {
  Message m;
  m.type = MessageType::kPull;
  m.request_id = id;
  return m;
}

TEST(ServerTest, PullBeforeTheChiefInitialisesIsAnErrorNamingTheChief) {
  auto config = ConfigNode::Parse("{optimizer: {type: sgd}, learning_rate: {initial: 1.0}}", "t");
  ParameterServer server(ServerOptions{}, VariableStore::FromConfig(*config).value());
  auto out = Send(&server, 1, Pull(1));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.type, MessageType::kError);
  EXPECT_NE(out[0].message.text.find("waiting for the chief"), std::string::npos);
}

TEST(ServerTest, AsyncAppliesEveryPushAndAdvancesTheStep) {
  auto server = MakeServer(UpdateMode::kAsync, 2);
  Send(server.get(), 0, Push(0, 1.0f, 1));
  Send(server.get(), 1, Push(0, 2.0f, 1));
  EXPECT_EQ(server->global_step(), 2);
  auto out = Send(server.get(), 0, Pull(2));
  EXPECT_FLOAT_EQ(out[0].message.tensors[0].tensor[0], 7.0f);
  EXPECT_EQ(out[0].message.step, 2);
}

TEST(ServerTest, SyncRepliesAndPullsWaitForTheWholeUpdate) {
  auto server = MakeServer(UpdateMode::kSync, 2);
  // Worker 0 pushes and pulls: neither is answered until worker 1's push completes the step.
  EXPECT_TRUE(Send(server.get(), 0, Push(0, 1.0f, 1)).empty());
  EXPECT_TRUE(Send(server.get(), 0, Pull(2)).empty());
  auto out = Send(server.get(), 1, Push(0, 3.0f, 1));
  ASSERT_EQ(out.size(), 3u);  // both pushes and worker 0's pull
  bool saw_pull = false;
  for (const auto& o : out) {
    if (o.peer == "w0" && o.message.request_id == 2) {
      saw_pull = true;
      EXPECT_FLOAT_EQ(o.message.tensors[0].tensor[0], 8.0f);  // 10 - mean(1, 3)
      EXPECT_EQ(o.message.step, 1);
    }
  }
  EXPECT_TRUE(saw_pull);
}

TEST(ServerTest, SyncWithABackupWorkerUpdatesOnTheFirstPushAndDropsTheLateOne) {
  auto server = MakeServer(UpdateMode::kSync, 2, /*backup=*/1);
  auto out = Send(server.get(), 0, Push(0, 2.0f, 1));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(server->global_step(), 1);
  out = Send(server.get(), 1, Push(0, 100.0f, 1));  // late, from version 0
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.value, -1);
  EXPECT_EQ(server->stats().dropped_stale, 1);
  out = Send(server.get(), 1, Pull(2));
  EXPECT_FLOAT_EQ(out[0].message.tensors[0].tensor[0], 8.0f);
}

TEST(ServerTest, AStaleProcessIsRefusedWithoutLearningTheNewProcesssIncarnation) {
  auto server = MakeServer(UpdateMode::kAsync, 2);
  Message fresh = Pull(1);
  fresh.role = "worker";
  fresh.task_index = 1;
  fresh.incarnation = 987654321987;
  ASSERT_EQ(server->Handle("w1", fresh).at(0).message.type, MessageType::kOk);
  Message stale = fresh;
  stale.request_id = 2;
  stale.incarnation = 5;
  auto out = server->Handle("w1", stale);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.type, MessageType::kError);
  EXPECT_NE(out[0].message.text.find("is older than one that has spoken since"), std::string::npos)
      << out[0].message.text;
  EXPECT_EQ(out[0].message.text.find("987654321987"), std::string::npos) << out[0].message.text;
  // Not Uninitialized, which a chief takes for a server that lost its variables.
  EXPECT_EQ(out[0].message.error_code, StatusCode::kPermissionDenied) << out[0].message.text;
}

TEST(ServerTest, BarrierReleasesEveryoneWhenTheLastArrives) {
  auto server = MakeServer(UpdateMode::kAsync, 2);
  Message b;
  b.type = MessageType::kBarrier;
  b.text = "done";
  b.value = 3;
  EXPECT_TRUE(Send(server.get(), 0, b).empty());
  EXPECT_TRUE(Send(server.get(), 1, b).empty());
  EXPECT_EQ(Send(server.get(), 2, b).size(), 3u);
}

TEST(ServerTest, StateTensorsNamedInThePushAreAssignedNotApplied) {
  auto server = MakeServer(UpdateMode::kAsync, 1);
  Message m = Push(0, 4.0f, 1);
  m.assigns = {"w"};  // e.g. batch-norm moving statistics
  Send(server.get(), 0, m);
  auto out = Send(server.get(), 0, Pull(2));
  EXPECT_FLOAT_EQ(out[0].message.tensors[0].tensor[0], 4.0f);
}

TEST(ServerTest, AnUpdateNeverChangesBytesAPullReplyStillHolds) {
  auto server = MakeServer(UpdateMode::kAsync, 1);
  auto pulled = Send(server.get(), 0, Pull(1));
  const Tensor in_flight = pulled[0].message.tensors[0].tensor;  // as a pending send holds it
  Send(server.get(), 0, Push(0, 1.0f, 2));
  EXPECT_FLOAT_EQ(in_flight[0], 10.0f);  // copy-on-write: the reply's bytes are intact
  auto fresh = Send(server.get(), 0, Pull(3));
  EXPECT_FLOAT_EQ(fresh[0].message.tensors[0].tensor[0], 9.0f);
}

TEST(ServerTest, AnAssignNeverChangesBytesAPullReplyStillHolds) {
  auto server = MakeServer(UpdateMode::kAsync, 1);
  auto pulled = Send(server.get(), 0, Pull(1));
  const Tensor in_flight = pulled[0].message.tensors[0].tensor;
  Message m = Push(0, 4.0f, 2);
  m.assigns = {"w"};  // batch-norm moving statistics, assigned while the reply is being sent
  Send(server.get(), 0, m);
  EXPECT_FLOAT_EQ(in_flight[0], 10.0f);
  auto fresh = Send(server.get(), 0, Pull(3));
  EXPECT_FLOAT_EQ(fresh[0].message.tensors[0].tensor[0], 4.0f);
}

TEST(ServerTest, RepliesInFlightChangeNoUpdateValue) {
  // The same pushes through two servers, one with a pull reply held across every push: the
  // values agree bit for bit, though one server wrote them to its variable's other buffer.
  auto held = MakeServer(UpdateMode::kAsync, 1), alone = MakeServer(UpdateMode::kAsync, 1);
  std::vector<Tensor> in_flight;
  for (int i = 0; i < 5; ++i) {
    in_flight.push_back(Send(held.get(), 0, Pull(100 + i))[0].message.tensors[0].tensor);
    if (i % 2 == 1) in_flight.clear();  // some replies are sent before the next push
    Send(held.get(), 0, Push(i, 0.1f * static_cast<float>(i + 1), 200 + i));
    Send(alone.get(), 1, Push(i, 0.1f * static_cast<float>(i + 1), 200 + i));
  }
  const Tensor a = Send(held.get(), 0, Pull(300))[0].message.tensors[0].tensor;
  const Tensor b = Send(alone.get(), 1, Pull(300))[0].message.tensors[0].tensor;
  EXPECT_EQ(a.ToVector(), b.ToVector());
  EXPECT_FLOAT_EQ(a[0], 10.0f - 1.5f);
}

// --push_dtype=bf16: a pull asking for bfloat16 is answered in it, held or not, and the bytes
// counted are those on the wire (2 a bfloat16 element, 4 a float32 one), so the metrics halve.
TEST(ServerTest, ABfloat16PullIsAnsweredInItAndBytesAreCountedAsTheyTravel) {
  for (UpdateMode mode : {UpdateMode::kAsync, UpdateMode::kSync}) {
    auto server = MakeServer(mode, 1);
    const int64_t registered = server->stats().bytes_in;
    EXPECT_EQ(registered, 3 * 4);  // the chief's float32 values
    Message push = Push(0, 1.0f, 1);
    push.tensors[0].dtype = wire::TensorDType::kBfloat16;
    Send(server.get(), 0, push);
    EXPECT_EQ(server->stats().bytes_in - registered, 3 * 2);
    const int64_t out_before = server->stats().bytes_out;
    Message pull = Pull(2);
    pull.pull_dtype = wire::TensorDType::kBfloat16;
    auto out = Send(server.get(), 0, pull);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].message.tensors.size(), 1u);
    EXPECT_EQ(out[0].message.tensors[0].dtype, wire::TensorDType::kBfloat16);
    EXPECT_FLOAT_EQ(out[0].message.tensors[0].tensor[0], 9.0f) << "the server holds float32";
    EXPECT_EQ(server->stats().bytes_out - out_before, 3 * 2);
    out = Send(server.get(), 0, Pull(3));
    EXPECT_EQ(out[0].message.tensors[0].dtype, wire::TensorDType::kFloat32);
    EXPECT_EQ(server->stats().bytes_out - out_before, 3 * 2 + 3 * 4);
  }
  // A sync pull held until the update keeps the dtype it asked for.
  auto server = MakeServer(UpdateMode::kSync, 2);
  Send(server.get(), 0, Push(0, 1.0f, 1));
  Message pull = Pull(2);
  pull.pull_dtype = wire::TensorDType::kBfloat16;
  EXPECT_TRUE(Send(server.get(), 0, pull).empty());
  bool saw_pull = false;
  for (const auto& o : Send(server.get(), 1, Push(0, 3.0f, 1))) {
    if (o.message.tensors.empty()) continue;
    saw_pull = true;
    EXPECT_EQ(o.message.tensors[0].dtype, wire::TensorDType::kBfloat16);
  }
  EXPECT_TRUE(saw_pull);
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
