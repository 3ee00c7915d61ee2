// A server's side of cluster checkpoints (ps/shard_checkpoints.h, ps/server_checkpoints.cc):
// saves are written in the background while the server goes on answering, from a snapshot that
// later updates do not touch; the register reply lists the steps a shard holds whole, damaged
// files set aside with a warning; shards restore the step the chief picks, never each its own
// newest; a shard the chief initialises again takes its slots from its newest whole checkpoint.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/checkpoint_manager.h"
#include "common/checkpoint/cluster_checkpoint.h"
#include "ps/server.h"
#include "ps/server_task.h"
#include "tests/captured_log.h"

namespace pstrain {
namespace ps {
namespace {

using std::chrono::milliseconds;
using wire::Message;
using wire::MessageType;

constexpr char kMomentum[] =
    "{optimizer: {type: momentum, momentum: 0.5}, learning_rate: {initial: 1.0}}";

class ServerCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "pstrain-server-ckpt-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  ServerOptions OptionsOf(int task, int num_ps, std::function<void(int64_t)> before_write) {
    ServerOptions o;
    o.task_index = task;
    o.num_ps = num_ps;
    o.num_workers = 1;
    o.train_dir = dir_;
    o.before_checkpoint_write = std::move(before_write);
    return o;
  }
  static Result<std::unique_ptr<VariableStore>> NewStore() {
    auto config = ConfigNode::Parse(kMomentum, "t");
    return VariableStore::FromConfig(*config);
  }
  // Task `task` of `num_ps` servers over train_dir dir_, holding nothing yet.
  std::unique_ptr<ParameterServer> NewServer(int task = 0, int num_ps = 1,
                                             std::function<void(int64_t)> before_write = {}) {
    return std::make_unique<ParameterServer>(OptionsOf(task, num_ps, std::move(before_write)),
                                             NewStore().value());
  }

  static Message Chief(MessageType type, int64_t step = 0) {
    Message m;
    m.type = type;
    m.role = "chief";
    m.task_index = 0;
    m.incarnation = 7;
    m.step = step;
    m.request_id = ++next_id_;
    return m;
  }
  // The chief's register with the initial value of "w" (every element `value`).
  static Message Init(float value, int64_t step = 0) {
    Message m = Chief(MessageType::kRegister, step);
    m.tensors.push_back({"w", Tensor::Filled(Shape{4}, value)});
    return m;
  }
  static Message Push(float g) {
    Message m = Chief(MessageType::kPush);
    m.sequence = ++next_sequence_;
    m.tensors.push_back({"w", Tensor::Filled(Shape{4}, g)});
    return m;
  }
  static Message Restore(int64_t step) {
    return Chief(MessageType::kRestore, step);
  }
  // Handles `m`, expecting exactly one OK reply.
  static Message Ok(ParameterServer* server, const Message& m) {
    auto out = server->Handle("chief", m);
    EXPECT_EQ(out.size(), 1u);
    if (out.empty()) return Message();
    EXPECT_EQ(out[0].message.type, MessageType::kOk) << out[0].message.text;
    return out[0].message;
  }
  // Saves at `step` and waits for the file to be durable; returns its path.
  static std::string Save(ParameterServer* server, int64_t step) {
    EXPECT_TRUE(server->Handle("chief", Chief(MessageType::kCheckpoint, step)).empty());
    auto done = server->TakeFinishedCheckpoints(/*wait=*/true);
    EXPECT_EQ(done.size(), 1u);
    if (done.empty()) return "";
    EXPECT_EQ(done[0].message.type, MessageType::kOk) << done[0].message.text;
    return done[0].message.text;
  }
  static std::vector<float> Values(const Tensor& t) {
    return std::vector<float>(t.data(), t.data() + t.size());
  }
  static std::vector<float> Of(const ParameterServer& server, const std::string& name) {
    return Values(server.store().StateTensors().at(name));
  }
  std::string ShardFile(int task, int num_ps, int64_t step) const {
    return ShardDirectory(dir_, task, num_ps) + "/" + CheckpointName(step);
  }
  void Damage(const std::string& path) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(path) / 2));
    f.write("\xde\xad\xbe\xef\xde\xad\xbe\xef", 8);
  }

  std::string dir_;
  static inline uint64_t next_id_ = 0;
  static inline uint64_t next_sequence_ = 0;
};

TEST_F(ServerCheckpointTest, AHeartbeatAndAPullAreAnsweredWhileTheCheckpointIsBeingWritten) {
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  auto socket = wire::ServerSocket::Bind("tcp://127.0.0.1:0");
  ASSERT_TRUE(socket.ok()) << socket.status().ToString();
  const std::string endpoint = (*socket)->endpoint();
  ServerTaskOptions t;  // the server role's serving loop
  t.server = OptionsOf(0, 1, [gate](int64_t) { gate.wait(); });
  t.new_store = NewStore;
  auto task = ServerTask::Create(std::move(t), std::move(socket).value());
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  std::thread serving([&] { EXPECT_TRUE((*task)->Serve().ok()); });
  auto chief = wire::Connection::Connect(endpoint);
  ASSERT_TRUE(chief.ok());
  ASSERT_TRUE((*chief)->Call(Init(10.0f), milliseconds(5000)).ok());

  const Message checkpoint = Chief(MessageType::kCheckpoint, 3);
  ASSERT_TRUE((*chief)->Send(checkpoint).ok());
  const Message heartbeat = Chief(MessageType::kHeartbeat);
  ASSERT_TRUE((*chief)->Send(heartbeat).ok());
  const Message pull = Chief(MessageType::kPull);
  ASSERT_TRUE((*chief)->Send(pull).ok());
  // The save is held open on the writer's thread: the heartbeat and the pull come back anyway.
  for (uint64_t expected : {heartbeat.request_id, pull.request_id}) {
    Result<Message> reply = (*chief)->Receive(milliseconds(5000));
    ASSERT_TRUE(reply.ok()) << "no reply while a checkpoint was being written: "
                            << reply.status().ToString();
    EXPECT_EQ(reply->request_id, expected) << "the checkpoint was answered before it was written";
    EXPECT_EQ(reply->type, MessageType::kOk);
  }
  EXPECT_FALSE(std::filesystem::exists(ShardFile(0, 1, 3)));
  release.set_value();
  Result<Message> saved = (*chief)->Receive(milliseconds(10000));
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  EXPECT_EQ(saved->request_id, checkpoint.request_id);
  EXPECT_EQ(saved->type, MessageType::kOk) << saved->text;
  EXPECT_EQ(saved->text, ShardFile(0, 1, 3));
  EXPECT_TRUE(ReadCheckpoint(ShardFile(0, 1, 3)).ok());  // durable before the reply

  ASSERT_TRUE((*chief)->Call(Chief(MessageType::kShutdown), milliseconds(5000)).ok());
  serving.join();
}

TEST_F(ServerCheckpointTest, ACheckpointHoldsTheStateAtItsRequestNotUpdatesMadeWhileWriting) {
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  auto server = NewServer(0, 1, [gate](int64_t) { gate.wait(); });
  Ok(server.get(), Init(10.0f));
  Ok(server.get(), Push(1.0f));  // w 9, momentum slot 1
  const std::vector<float> value = Of(*server, "w"), slot = Of(*server, "w/momentum");
  EXPECT_TRUE(server->Handle("chief", Chief(MessageType::kCheckpoint, 1)).empty());
  Ok(server.get(), Push(1.0f));  // while the snapshot is being written: both change
  EXPECT_NE(Of(*server, "w"), value);
  EXPECT_NE(Of(*server, "w/momentum"), slot);
  const std::vector<float> updated = Of(*server, "w");
  EXPECT_TRUE(server->TakeFinishedCheckpoints(false).empty());
  release.set_value();
  auto done = server->TakeFinishedCheckpoints(true);
  ASSERT_EQ(done.size(), 1u);
  Result<CheckpointData> file = ReadCheckpoint(done[0].message.text);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(Values(file->tensors.at("w")), value);
  EXPECT_EQ(Values(file->tensors.at("w/momentum")), slot);
  EXPECT_EQ(Of(*server, "w"), updated);  // and the live values are the updated ones
}

TEST_F(ServerCheckpointTest, ShardsRestoreTheNewestStepBothHoldNeverEachItsOwnNewest) {
  auto ps0 = NewServer(0, 2), ps1 = NewServer(1, 2);
  Ok(ps0.get(), Init(10.0f));
  Ok(ps1.get(), Init(20.0f));
  Save(ps0.get(), 100);
  Save(ps1.get(), 100);
  ASSERT_TRUE(CommitStep(dir_, 100, 0).ok());  // what the chief does once both answered
  const std::vector<float> at100_0 = Of(*ps0, "w"), at100_1 = Of(*ps1, "w");
  Ok(ps0.get(), Push(1.0f));
  Ok(ps1.get(), Push(1.0f));
  Save(ps0.get(), 200);  // then ps 0 died, before ps 1 saved 200 and before any commit
  ps0 = NewServer(0, 2);

  // What the chief learns from the register replies, and what it picks.
  const Message held0 = Ok(ps0.get(), Chief(MessageType::kRegister));
  const Message held1 = Ok(ps1.get(), Chief(MessageType::kRegister));
  EXPECT_EQ(held0.value, 0);  // restarted: holds nothing until the chief decides
  EXPECT_EQ(held1.value, 1);
  const std::vector<int64_t> whole0 = held0.steps;
  const std::vector<int64_t> whole1 = held1.steps;
  EXPECT_EQ(whole0, (std::vector<int64_t>{100, 200}));
  EXPECT_EQ(whole1, (std::vector<int64_t>{100}));
  std::optional<int64_t> step =
      NewestRestorableStep({whole0, whole1}, ReadCommittedSteps(dir_).value());
  ASSERT_EQ(step, 100);

  // Both go back to 100: the restarted one from nothing, the running one from later values.
  EXPECT_EQ(Ok(ps0.get(), Restore(*step)).text, "restored");
  EXPECT_EQ(Ok(ps1.get(), Restore(*step)).text, "restored");
  EXPECT_EQ(ps0->global_step(), 100);
  EXPECT_EQ(ps1->global_step(), 100);
  EXPECT_EQ(Of(*ps0, "w"), at100_0);
  EXPECT_EQ(Of(*ps1, "w"), at100_1);
  // ps 0's step 200 belongs to the abandoned run: gone, so a later 200 is not mistaken for it.
  EXPECT_FALSE(std::filesystem::exists(ShardFile(0, 2, 200)));
  EXPECT_EQ(Ok(ps0.get(), Chief(MessageType::kRegister)).steps,
            (std::vector<int64_t>{100}));
}

TEST_F(ServerCheckpointTest, OnlyTheChiefMayAskForARestore) {
  auto server = NewServer();
  Ok(server.get(), Init(1.0f));
  Save(server.get(), 5);
  Message m = Restore(5);
  m.role = "worker";
  m.task_index = 1;
  auto out = server->Handle("w1", m);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.type, MessageType::kError);
}

TEST_F(ServerCheckpointTest, ADamagedNewestShardFileIsSetAsideWithAWarningNamingIt) {
  auto server = NewServer();
  Ok(server.get(), Init(10.0f));
  Save(server.get(), 100);
  Ok(server.get(), Push(1.0f));
  Save(server.get(), 200);
  Damage(ShardFile(0, 1, 200));  // a torn write or a bad disk
  server = NewServer();          // killed and started again

  testing::CapturedLog log;
  const Message held = Ok(server.get(), Chief(MessageType::kRegister));
  EXPECT_EQ(held.steps, (std::vector<int64_t>{100}));
  EXPECT_NE(log.Find({"WARNING", "skipping damaged checkpoint " + ShardFile(0, 1, 200),
                      "checksum mismatch"}),
            "")
      << "the warning must name the file and why";
  EXPECT_TRUE(std::filesystem::exists(ShardFile(0, 1, 200) + ".damaged"));
  EXPECT_FALSE(std::filesystem::exists(ShardFile(0, 1, 200)));
  CheckpointManager index(ShardDirectory(dir_, 0, 1), 5);
  EXPECT_EQ(index.LatestPath().value(), ShardFile(0, 1, 100));
  // No crash loop: the older step restores.
  EXPECT_EQ(Ok(server.get(), Restore(100)).text, "restored");
  EXPECT_EQ(server->global_step(), 100);
}

TEST_F(ServerCheckpointTest, AServerInitialisedAgainTakesItsSlotsFromItsNewestWholeCheckpoint) {
  auto server = NewServer();
  Ok(server.get(), Init(10.0f));
  Ok(server.get(), Push(1.0f));
  Save(server.get(), 1);
  const std::vector<float> slot1 = Of(*server, "w/momentum");
  Ok(server.get(), Push(2.0f));
  Save(server.get(), 2);
  Ok(server.get(), Push(4.0f));
  Damage(ShardFile(0, 1, 2));
  server = NewServer();  // restarted under a live chief, which sends its values at step 3

  testing::CapturedLog log;
  Ok(server.get(), Init(5.0f, 3));
  EXPECT_EQ(Of(*server, "w"), std::vector<float>(4, 5.0f));  // the chief's values
  EXPECT_EQ(Of(*server, "w/momentum"), slot1);  // step 2's file is damaged: step 1's slots
  EXPECT_NE(log.Find({"optimizer slots from its checkpoint of step 1"}), "");
  EXPECT_NE(log.Find({"WARNING", ShardFile(0, 1, 2)}), "");

  // With nothing saved at or before the chief's step, slots start afresh.
  auto fresh = NewServer();
  Ok(fresh.get(), Init(5.0f, 0));
  EXPECT_EQ(Of(*fresh, "w/momentum"), std::vector<float>(4, 0.0f));
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
