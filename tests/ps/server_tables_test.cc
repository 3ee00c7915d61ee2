// A parameter server's embedding rows driven through Handle: row requests reach its table shard
// once it is initialised, are refused without one, and the rows with their optimizer slots are
// saved in the shard's checkpoints and restored from them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "common/checkpoint/joined_checkpoint.h"
#include "common/row_owner.h"
#include "ps/server.h"

namespace pstrain {
namespace ps {
namespace {

using wire::Message;
using wire::MessageType;

constexpr char kTables[] =
    "{optimizer: {type: adagrad}, learning_rate: {initial: 0.5}, "
    "list: [{name: C1, dimension: 2, max_rows: 50, initializer: {type: uniform, scale: 1}}]}";

class ServerTablesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "pstrain-server-tables-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Server `task` of `servers`, with the table C1 unless `tables` is false.
  std::unique_ptr<ParameterServer> NewServer(bool tables = true,
                                             UpdateMode mode = UpdateMode::kAsync, int task = 0,
                                             int servers = 1, const char* config = kTables) {
    ServerOptions o;
    o.task_index = task;
    o.num_ps = servers;
    o.mode = mode;
    o.max_staleness = 1;
    o.num_workers = workers_;
    o.train_dir = dir_;
    auto store = VariableStore::FromConfig(
        ConfigNode::Parse("{optimizer: {type: sgd}, learning_rate: {initial: 1.0}}", "t").value());
    auto server = std::make_unique<ParameterServer>(o, std::move(store).value());
    if (tables) {
      auto shard =
          TableShard::FromConfig(ConfigNode::Parse(config, "t").value(), 0, {task, servers, 0});
      EXPECT_TRUE(shard.ok()) << shard.status().ToString();
      server->SetTables(std::move(shard).value());
    }
    return server;
  }
  Message From(const std::string& role, MessageType type) {
    Message m;
    m.type = type;
    m.role = role;
    m.task_index = 0;
    m.incarnation = 9;
    m.request_id = ++next_id_;
    return m;
  }
  Message Reply(ParameterServer* server, const Message& m) {
    auto out = server->Handle("peer", m);
    EXPECT_EQ(out.size(), 1u) << wire::MessageTypeName(m.type);
    return out.empty() ? Message() : out[0].message;
  }
  void Init(ParameterServer* server, int64_t step = 0) {
    Message init = From("chief", MessageType::kRegister);
    init.step = step;
    init.tensors.push_back({"w", Tensor::Filled(Shape{2}, 1.0f)});
    ASSERT_EQ(Reply(server, init).type, MessageType::kOk);
  }
  Message RowPull(const std::vector<int64_t>& ids, const std::string& role = "worker") {
    Message m = From(role, MessageType::kRowPull);
    m.text = "C1";
    m.ids = ids;
    return m;
  }
  Message RowPush(const std::vector<int64_t>& ids, float g) {
    Message m = From("worker", MessageType::kRowPush);
    m.text = "C1";
    m.sequence = ++sequence_;
    m.ids = ids;
    m.tensors.push_back({"C1", Tensor::Filled(Shape{static_cast<int64_t>(ids.size()), 2}, g)});
    return m;
  }
  std::vector<float> Rows(ParameterServer* server, const std::vector<int64_t>& ids) {
    Message r = Reply(server, RowPull(ids));
    EXPECT_EQ(r.type, MessageType::kOk) << r.text;
    return r.tensors.empty() ? std::vector<float>() : r.tensors[0].tensor.ToVector();
  }
  // One worker's dense pull and push of step global_step().
  void DenseStep(ParameterServer* server, const std::string& role = "worker", int task = 0) {
    Message pull = From(role, MessageType::kPull);
    pull.task_index = task;
    pull.names = {"w"};
    ASSERT_EQ(Reply(server, pull).type, MessageType::kOk);
    Message push = From(role, MessageType::kPush);
    push.task_index = task;
    push.sequence = ++dense_sequence_[task];
    push.step = server->global_step();
    push.tensors.push_back({"w", Tensor::Filled(Shape{2}, 0.1f)});
    auto out = server->Handle("peer", push);  // in a window: answered once it closes
    for (const auto& o : out) EXPECT_EQ(o.message.type, MessageType::kOk) << o.message.text;
  }
  void Save(ParameterServer* server, int64_t step) {
    Message save = From("chief", MessageType::kCheckpoint);
    save.step = step;
    EXPECT_TRUE(server->Handle("chief", save).empty());
    auto done = server->TakeFinishedCheckpoints(/*wait=*/true);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].message.type, MessageType::kOk) << done[0].message.text;
  }

  std::string dir_;
  uint64_t next_id_ = 0, sequence_ = 0;
  std::map<int, uint64_t> dense_sequence_;
  int workers_ = 1;  // the cluster's workers, for servers made after it is set
};

TEST_F(ServerTablesTest, RowRequestsWaitForInitialisationAndNeedTables) {
  auto server = NewServer();
  Message early = Reply(server.get(), RowPull({1}));
  EXPECT_EQ(early.error_code, StatusCode::kUninitialized) << early.text;
  auto without = NewServer(/*tables=*/false);
  Init(without.get());
  Message none = Reply(without.get(), RowPull({1}));
  EXPECT_EQ(none.error_code, StatusCode::kFailedPrecondition);
  EXPECT_NE(none.text.find("holds no embedding tables"), std::string::npos) << none.text;
}

TEST_F(ServerTablesTest, AnEvaluatorReadsRowsWithoutCreatingThemAndMayNotPush) {
  auto server = NewServer();
  Init(server.get());
  Message read = Reply(server.get(), RowPull({4, 5}, "evaluator"));
  ASSERT_EQ(read.type, MessageType::kOk) << read.text;
  EXPECT_EQ(read.tensors[0].tensor.ToVector(), std::vector<float>(4, 0.0f));
  EXPECT_EQ(server->tables()->rows(), 0);
  Message push = RowPush({4}, 1.0f);
  push.role = "evaluator";
  EXPECT_EQ(Reply(server.get(), push).error_code, StatusCode::kPermissionDenied);
}

// An evaluation's pull from a worker (the chief's final one) is read-only as an evaluator's:
// test ids create no row, and open no row push.
TEST_F(ServerTablesTest, AWorkersReadOnlyPullCreatesNoRowAndOpensNoPush) {
  auto server = NewServer();
  Init(server.get());
  Rows(server.get(), {1});  // a training pull: its row exists, its push is the sender's first
  ASSERT_EQ(Reply(server.get(), RowPush({1}, 1.0f)).type, MessageType::kOk);
  Message lookup = RowPull({6, 7});
  lookup.value = 1;  // read-only
  const Message read = Reply(server.get(), lookup);
  ASSERT_EQ(read.type, MessageType::kOk) << read.text;
  EXPECT_EQ(read.tensors[0].tensor.ToVector(), std::vector<float>(4, 0.0f));
  EXPECT_EQ(server->tables()->rows(), 1) << "a read-only pull created rows";
  EXPECT_EQ(server->stats().table_rows, 1);
  EXPECT_EQ(Reply(server.get(), RowPush({6}, 1.0f)).error_code, StatusCode::kPermissionDenied)
      << "a read-only pull opened a row push";
}

TEST_F(ServerTablesTest, ARetriedRowPushIsAnsweredWithoutBeingAppliedTwice) {
  auto server = NewServer();
  Init(server.get());
  Rows(server.get(), {3});
  const Message push = RowPush({3}, 1.0f);
  ASSERT_EQ(Reply(server.get(), push).type, MessageType::kOk);
  const std::vector<float> once = Rows(server.get(), {3});
  Message retry = push;
  retry.request_id = ++next_id_;
  EXPECT_EQ(Reply(server.get(), retry).type, MessageType::kOk);
  EXPECT_EQ(Rows(server.get(), {3}), once);
}

TEST_F(ServerTablesTest, AStaleRowPushIsDroppedInSyncModeAndAppliedInAsync) {
  for (UpdateMode mode : {UpdateMode::kSync, UpdateMode::kAsync}) {
    auto server = NewServer(true, mode);
    Init(server.get(), /*step=*/5);
    const std::vector<float> before = Rows(server.get(), {8});
    Message stale = RowPush({8}, 1.0f);
    stale.step = 3;  // two updates behind, max_staleness 1
    Message reply = Reply(server.get(), stale);
    ASSERT_EQ(reply.type, MessageType::kOk) << reply.text;
    if (mode == UpdateMode::kSync) {
      EXPECT_EQ(reply.value, -1);
      EXPECT_NE(reply.text.find("stale: computed from step 3, now at 5"), std::string::npos);
      EXPECT_EQ(Rows(server.get(), {8}), before);
      EXPECT_EQ(server->stats().dropped_stale, 1);
      Message fresh = RowPush({8}, 1.0f);
      fresh.step = 4;
      EXPECT_EQ(Reply(server.get(), fresh).value, 0);
      EXPECT_EQ(Rows(server.get(), {8}), before) << "applied before its window closed";
      DenseStep(server.get());  // one worker: the window closes
    }
    EXPECT_NE(Rows(server.get(), {8}), before) << "mode " << static_cast<int>(mode);
  }
}

TEST_F(ServerTablesTest, RowsUntouchedForEvictAfterStepsGoAsTheGlobalStepPasses) {
  auto server = NewServer(true, UpdateMode::kAsync, 0, 1,
                          "{optimizer: {type: adagrad}, learning_rate: {initial: 0.5}, list: "
                          "[{name: C1, dimension: 2, max_rows: 50, evict_after_steps: 3}]}");
  Init(server.get());
  auto row_step = [&](const std::vector<int64_t>& ids) {
    ASSERT_EQ(Reply(server.get(), RowPull(ids)).type, MessageType::kOk);
    Message push = RowPush(ids, 0.5f);
    push.step = server->global_step();
    const Message reply = Reply(server.get(), push);
    ASSERT_EQ(reply.type, MessageType::kOk) << reply.text;
  };
  row_step({1, 2});
  row_step({3});
  ASSERT_EQ(server->tables()->rows(), 3);
  for (int k = 0; k < 3; ++k) DenseStep(server.get());
  ASSERT_EQ(server->global_step(), 3);
  row_step({3});  // touched at step 3; 1 and 2 were last touched at step 0
  EXPECT_EQ(server->tables()->rows(), 1);
  EXPECT_EQ(server->tables()->Find("C1")->Row(1), nullptr);
  EXPECT_NE(server->tables()->Find("C1")->Row(3), nullptr);
  EXPECT_EQ(server->stats().table_rows, 1);
}

TEST_F(ServerTablesTest, AnAccumulateWindowAppliesTheMeanOfItsRowPushesOnceTheStepLeavesIt) {
  // Two workers' row pushes of one window: id 8's gradients 1 and 3, id 9's 4 in one push only.
  workers_ = 2;
  auto windowed = NewServer(true, UpdateMode::kAccumulate, 0, 1);
  Init(windowed.get());
  const std::vector<float> before = Rows(windowed.get(), {8, 9});
  for (int task : {0, 1}) {
    Message pull = RowPull({8, 9});
    pull.task_index = task;
    ASSERT_EQ(Reply(windowed.get(), pull).type, MessageType::kOk);
    Message push = RowPush({8, 9}, 0.0f);
    push.task_index = task;
    push.tensors[0].tensor = Tensor::FromVector(
        Shape{2, 2}, task == 0 ? std::vector<float>{1, 1, 4, 4} : std::vector<float>{3, 3, 0, 0});
    const Message reply = Reply(windowed.get(), push);
    ASSERT_EQ(reply.type, MessageType::kOk) << reply.text;
    EXPECT_EQ(Rows(windowed.get(), {8, 9}), before) << "applied before its window closed";
  }
  DenseStep(windowed.get(), "worker", 0);
  DenseStep(windowed.get(), "worker", 1);  // N = 2 workers: the window closes, step 1
  ASSERT_EQ(windowed->global_step(), 1);
  // The same rows given the window's mean once (2 for id 8, 2 for id 9: 4 over 2 pushes).
  auto once = NewServer(true, UpdateMode::kAsync, 0, 1);
  Init(once.get());
  ASSERT_EQ(Rows(once.get(), {8, 9}), before);
  ASSERT_EQ(Reply(once.get(), RowPush({8, 9}, 2.0f)).type, MessageType::kOk);
  EXPECT_EQ(Rows(windowed.get(), {8, 9}), Rows(once.get(), {8, 9}));
}

TEST_F(ServerTablesTest, RowsAndTheirSlotsComeBackFromTheShardsCheckpoint) {
  auto server = NewServer();
  Init(server.get());
  const std::vector<int64_t> ids = {2, 7, 11};
  Rows(server.get(), ids);
  ASSERT_EQ(Reply(server.get(), RowPush(ids, 0.5f)).type, MessageType::kOk);
  Save(server.get(), 1);
  const std::vector<float> saved = Rows(server.get(), ids);
  // What one more push does from the saved rows and accumulators.
  ASSERT_EQ(Reply(server.get(), RowPush(ids, -2.0f)).type, MessageType::kOk);
  const std::vector<float> next = Rows(server.get(), ids);
  ASSERT_NE(next, saved);
  Rows(server.get(), {30});  // a row created after the save

  Message restore = From("chief", MessageType::kRestore);
  restore.step = 1;
  Message restored = Reply(server.get(), restore);
  ASSERT_EQ(restored.type, MessageType::kOk) << restored.text;
  EXPECT_EQ(server->tables()->rows(), 3) << "the row created after the save is gone";
  EXPECT_EQ(Rows(server.get(), ids), saved);
  ASSERT_EQ(Reply(server.get(), RowPush(ids, -2.0f)).type, MessageType::kOk);
  EXPECT_EQ(Rows(server.get(), ids), next) << "the accumulators were not restored";

  // A server started afresh restores the same rows.
  auto fresh = NewServer();
  fresh->FindCheckpoints();
  restore.request_id = ++next_id_;
  ASSERT_EQ(Reply(fresh.get(), restore).type, MessageType::kOk);
  EXPECT_EQ(Rows(fresh.get(), ids), saved);
}

TEST_F(ServerTablesTest, TheServersCheckpointsJoinIntoWholeTables) {
  std::vector<std::unique_ptr<ParameterServer>> servers;
  std::vector<float> pulled;  // every server's rows, in server order
  std::vector<int64_t> ids;
  for (int k = 0; k < 2; ++k) {
    servers.push_back(NewServer(true, UpdateMode::kAsync, k, 2));
    Init(servers[k].get());
    std::vector<int64_t> owned;
    for (int64_t id = 0; owned.size() < static_cast<size_t>(2 + k); ++id) {
      if (RowOwner("C1", id, 2) == k) owned.push_back(id);
    }
    const std::vector<float> rows = Rows(servers[k].get(), owned);
    pulled.insert(pulled.end(), rows.begin(), rows.end());
    ids.insert(ids.end(), owned.begin(), owned.end());
    Save(servers[k].get(), 4);
  }
  Result<JoinedCheckpoint> joined = ReadJoinedCheckpoint(dir_);
  ASSERT_TRUE(joined.ok()) << joined.status().ToString();
  const auto& tensors = joined->data.tensors;
  ASSERT_TRUE(tensors.count("tables/C1/rows") && tensors.count("tables/C1/ids"));
  const Tensor& rows = tensors.at("tables/C1/rows");
  EXPECT_EQ(rows.shape(), (Shape{5, 2}));
  std::vector<int64_t> joined_ids(5);
  std::memcpy(joined_ids.data(), tensors.at("tables/C1/ids").data(), 5 * sizeof(int64_t));
  // Each server's rows in its own order (that of its row slots), the servers in order.
  std::vector<int64_t> sorted_joined = joined_ids, sorted_ids = ids;
  std::sort(sorted_joined.begin(), sorted_joined.end());
  std::sort(sorted_ids.begin(), sorted_ids.end());
  EXPECT_EQ(sorted_joined, sorted_ids);
  for (int i = 0; i < 5; ++i) {
    const size_t at = std::find(ids.begin(), ids.end(), joined_ids[i]) - ids.begin();
    EXPECT_EQ(rows[2 * i], pulled[2 * at]) << "id " << joined_ids[i];
    EXPECT_EQ(rows[2 * i + 1], pulled[2 * at + 1]) << "id " << joined_ids[i];
  }
  EXPECT_EQ(tensors.at("tables/C1/rows/accumulator").shape(), (Shape{5, 2}));
}

TEST_F(ServerTablesTest, AServerTheChiefInitialisesAgainTakesItsRowsFromItsNewestCheckpoint) {
  auto server = NewServer();
  Init(server.get());
  const std::vector<int64_t> ids = {5, 6};
  Rows(server.get(), ids);
  ASSERT_EQ(Reply(server.get(), RowPush(ids, 1.5f)).type, MessageType::kOk);
  Save(server.get(), 0);
  const std::vector<float> saved = Rows(server.get(), ids);
  // Restarted alone: the chief gives it the dense values, it holds no rows to give.
  auto restarted = NewServer();
  restarted->FindCheckpoints();
  Init(restarted.get());
  EXPECT_EQ(restarted->tables()->rows(), 2);
  EXPECT_EQ(Rows(restarted.get(), ids), saved);
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
