// A step pushed in parts (PsClient's overlapped push: each bucket of gradients leaves while
// backward computes the layers below it), driven through Handle(): in async mode every part is
// applied on arrival and the global step counts the step once, at its last part; a retried part
// is applied once; the other modes, which count whole pushes, refuse parts and change nothing.
#include <gtest/gtest.h>

#include "common/wire/request.h"
#include "ps/server.h"
#include "tests/ps/server_test_util.h"

namespace pstrain {
namespace ps {
namespace {

using wire::Message;
using wire::MessageType;

// A server holding "w" (3 x 10.0) and "b" (2 x 1.0), SGD at rate 1.
std::unique_ptr<ParameterServer> MakeServer(UpdateMode mode, int workers,
                                            int64_t max_staleness = 0) {
  ServerOptions o;
  o.mode = mode;
  o.num_workers = workers;
  o.max_staleness = max_staleness;
  auto server = InitializedSgdServer(
      o, {{"w", Tensor::Filled(Shape{3}, 10.0f)}, {"b", Tensor::Filled(Shape{2}, 1.0f)}});
  return server;
}

// Part of worker `task`'s push of `step` with sequence `sequence`: gradient `g` for `name`,
// `still_to_come` parts after it.
Message Part(int task, uint64_t sequence, int64_t step, const std::string& name, float g,
             int64_t still_to_come) {
  Message m;
  m.type = MessageType::kPush;
  m.request_id = sequence;
  m.role = "worker";
  m.task_index = task;
  m.incarnation = 1;
  m.sequence = sequence;
  m.step = step;
  m.value = still_to_come;
  m.tensors.push_back({name, Tensor::Filled(Shape{name == "w" ? 3 : 2}, g)});
  return m;
}

Message Handle(ParameterServer* server, const Message& m) {
  auto out = server->Handle("w" + std::to_string(m.task_index), m);
  EXPECT_EQ(out.size(), 1u);
  return out.empty() ? Message{} : out[0].message;
}

float ValueOf(ParameterServer* server, const std::string& name) {
  Message pull = wire::Request(MessageType::kPull, "worker", 0, 1);
  pull.names = {name};
  return Handle(server, pull).tensors.at(0).tensor[0];
}

TEST(ServerPushPartsTest, EachPartIsAppliedOnArrivalAndTheStepCountsOnceAtItsLastPart) {
  auto server = MakeServer(UpdateMode::kAsync, 2);
  // Backward's order: the last layer's bias first, then the weights that close the step.
  EXPECT_EQ(Handle(server.get(), Part(0, 1, 0, "b", 0.5f, 1)).type, MessageType::kOk);
  EXPECT_FLOAT_EQ(ValueOf(server.get(), "b"), 0.5f);  // applied before the step is whole
  EXPECT_EQ(server->global_step(), 0);
  // Two workers' parts interleave on the server; each worker's step counts once.
  Handle(server.get(), Part(1, 1, 0, "b", 0.25f, 1));
  EXPECT_EQ(server->global_step(), 0);
  Message closed = Handle(server.get(), Part(0, 2, 0, "w", 1.0f, 0));
  EXPECT_EQ(server->global_step(), 1);
  EXPECT_EQ(closed.step, 1);
  Handle(server.get(), Part(1, 2, 0, "w", 2.0f, 0));
  EXPECT_EQ(server->global_step(), 2);
  EXPECT_EQ(server->stats().updates, 2);
  EXPECT_EQ(server->stats().pushes, 4);
  EXPECT_FLOAT_EQ(ValueOf(server.get(), "w"), 7.0f);   // 10 - 1 - 2
  EXPECT_FLOAT_EQ(ValueOf(server.get(), "b"), 0.25f);  // 1 - 0.5 - 0.25
}

TEST(ServerPushPartsTest, ARetriedPartIsAppliedOnceAndDoesNotCountTheStepAgain) {
  auto server = MakeServer(UpdateMode::kAsync, 1);
  Handle(server.get(), Part(0, 1, 0, "b", 0.5f, 1));
  // The client resends every unanswered part of a server's round, in order, after a restart
  // or a silence: parts the server already applied are answered, not applied again.
  EXPECT_EQ(Handle(server.get(), Part(0, 1, 0, "b", 0.5f, 1)).type, MessageType::kOk);
  EXPECT_FLOAT_EQ(ValueOf(server.get(), "b"), 0.5f);
  Handle(server.get(), Part(0, 2, 0, "w", 1.0f, 0));
  EXPECT_EQ(server->global_step(), 1);
  EXPECT_EQ(Handle(server.get(), Part(0, 1, 0, "b", 0.5f, 1)).type, MessageType::kOk);
  EXPECT_EQ(Handle(server.get(), Part(0, 2, 0, "w", 1.0f, 0)).type, MessageType::kOk);
  EXPECT_EQ(server->global_step(), 1);
  EXPECT_EQ(server->stats().duplicates, 3);
  EXPECT_FLOAT_EQ(ValueOf(server.get(), "w"), 9.0f);
  EXPECT_FLOAT_EQ(ValueOf(server.get(), "b"), 0.5f);
  // The next step goes on from the next sequence number.
  Handle(server.get(), Part(0, 3, 1, "b", 0.5f, 1));
  Handle(server.get(), Part(0, 4, 1, "w", 1.0f, 0));
  EXPECT_EQ(server->global_step(), 2);
  EXPECT_FLOAT_EQ(ValueOf(server.get(), "b"), 0.0f);
}

TEST(ServerPushPartsTest, AsyncNeverDropsAStalePart) {
  auto server = MakeServer(UpdateMode::kAsync, 2, /*max_staleness=*/0);
  for (uint64_t s = 1; s <= 3; ++s) Handle(server.get(), Part(1, s, s - 1, "w", 1.0f, 0));
  // Worker 0's step, computed from version 0, is three updates behind: applied all the same.
  EXPECT_EQ(Handle(server.get(), Part(0, 1, 0, "b", 0.5f, 1)).value, 0);
  EXPECT_EQ(Handle(server.get(), Part(0, 2, 0, "w", 1.0f, 0)).value, 0);
  EXPECT_EQ(server->global_step(), 4);
  EXPECT_EQ(server->stats().dropped_stale, 0);
  EXPECT_FLOAT_EQ(ValueOf(server.get(), "w"), 6.0f);
}

TEST(ServerPushPartsTest, AccumulateAndSyncRefusePartsNamingTheFlagAndChangeNothing) {
  for (UpdateMode mode : {UpdateMode::kAccumulate, UpdateMode::kSync}) {
    auto server = MakeServer(mode, 1);
    Message refused = Handle(server.get(), Part(0, 1, 0, "b", 0.5f, 1));
    EXPECT_EQ(refused.type, MessageType::kError);
    EXPECT_NE(refused.text.find("needs --update_mode=async"), std::string::npos) << refused.text;
    EXPECT_NE(refused.text.find("--overlap_push=false"), std::string::npos) << refused.text;
    EXPECT_FLOAT_EQ(ValueOf(server.get(), "b"), 1.0f);
    EXPECT_EQ(server->global_step(), 0);
    // A whole push (nothing still to come) is what these modes take, under the same sequence.
    EXPECT_EQ(Handle(server.get(), Part(0, 1, 0, "b", 0.5f, 0)).type, MessageType::kOk);
    EXPECT_EQ(server->global_step(), 1);
  }
}

TEST(ServerPushPartsTest, AccumulateStillDropsAStaleWholePush) {
  auto server = MakeServer(UpdateMode::kAccumulate, 1, /*max_staleness=*/1);
  for (uint64_t s = 1; s <= 3; ++s) Handle(server.get(), Part(1, s, s - 1, "w", 1.0f, 0));
  EXPECT_EQ(server->global_step(), 3);
  Message dropped = Handle(server.get(), Part(0, 1, 0, "w", 1.0f, 0));
  EXPECT_EQ(dropped.value, -1);
  EXPECT_EQ(server->stats().dropped_stale, 1);
  EXPECT_EQ(server->global_step(), 3);
  EXPECT_FLOAT_EQ(ValueOf(server.get(), "w"), 7.0f);
}

TEST(ServerPushPartsTest, APartCountBeyondTheLimitIsRefusedNamingTheRange) {
  auto server = MakeServer(UpdateMode::kAsync, 1);
  for (int64_t bad : {int64_t{-1}, kMaxPushParts + 1}) {
    Message refused = Handle(server.get(), Part(0, 1, 0, "b", 0.5f, bad));
    EXPECT_EQ(refused.type, MessageType::kError);
    EXPECT_NE(refused.text.find("expected 0 to 4096"), std::string::npos) << refused.text;
  }
  EXPECT_FLOAT_EQ(ValueOf(server.get(), "b"), 1.0f);
}

// A worker that pulls by layer pulls once before its step and pushes the step's parts after:
// the parts of one step pass on one pull as long as each counts down from the one before; the
// step's last part uses the pull up.
TEST(ServerPushPartsTest, OnePullLetsInTheCountdownOfOneStepsPartsAndNoMore) {
  ServerOptions o;
  o.mode = UpdateMode::kAsync;
  o.num_workers = 1;
  o.one_push_per_pull = true;
  auto server = InitializedSgdServer(
      o, {{"w", Tensor::Filled(Shape{3}, 10.0f)}, {"b", Tensor::Filled(Shape{2}, 1.0f)}});
  ValueOf(server.get(), "w");  // worker 0's pull
  EXPECT_EQ(Handle(server.get(), Part(0, 1, 0, "b", 0.5f, 2)).type, MessageType::kOk);
  EXPECT_EQ(Handle(server.get(), Part(0, 2, 0, "w", 1.0f, 1)).type, MessageType::kOk);
  // A part that does not count down is a second step on the same pull.
  Message again = Handle(server.get(), Part(0, 3, 0, "w", 1.0f, 1));
  EXPECT_EQ(again.type, MessageType::kError);
  EXPECT_NE(again.text.find("a worker pushes one step per pull"), std::string::npos) << again.text;
  EXPECT_EQ(Handle(server.get(), Part(0, 3, 0, "b", 0.5f, 0)).type, MessageType::kOk);
  EXPECT_EQ(server->global_step(), 1);
  // The step is closed: the next one needs a pull.
  EXPECT_EQ(Handle(server.get(), Part(0, 4, 1, "b", 0.5f, 0)).type, MessageType::kError);
  EXPECT_EQ(server->global_step(), 1);
  EXPECT_FLOAT_EQ(ValueOf(server.get(), "w"), 9.0f);  // one part of w applied, the refused not
  EXPECT_EQ(Handle(server.get(), Part(0, 4, 1, "b", 0.5f, 0)).type, MessageType::kOk);
  EXPECT_EQ(server->global_step(), 2);
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
