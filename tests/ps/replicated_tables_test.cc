// Embedding rows under replication (--replicas, docs/replication.md): server tasks holding
// several shards, driven in-process through ServerTask::Handle, with every request one task
// sends another delivered by hand. A head's row push reaches its backup as the rows after it and
// is answered only once the backup holds them; a backup refuses row requests; a joiner's copy
// carries the rows; a new head answers a retried push without applying it twice.
#include <gtest/gtest.h>

#include <deque>
#include <map>

#include "common/config.h"
#include "common/row_owner.h"
#include "common/wire/request.h"
#include "ps/server_task.h"
#include "ps/state_digest.h"

namespace pstrain {
namespace ps {
namespace {

using wire::Message;
using wire::MessageType;

constexpr char kTables[] =
    "{optimizer: {type: adagrad}, learning_rate: {initial: 0.5}, "
    "list: [{name: C1, dimension: 2, max_rows: 50, initializer: {type: uniform, scale: 1}}]}";
constexpr int kServers = 3;

class ReplicatedTablesTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(UpdateMode::kAsync); }
  void Start(UpdateMode mode) {
    tasks_.clear();
    for (int t = 0; t < kServers; ++t) {
      ServerTaskOptions o;
      o.server.task_index = t;
      o.server.num_ps = kServers;
      o.server.replicas = 1;
      o.server.mode = mode;
      o.server.num_workers = 2;
      o.server.one_push_per_pull = one_push_per_pull_;
      o.server.train_dir = ::testing::TempDir() + "/replicated_tables_test";
      o.new_store = [] {
        return VariableStore::FromConfig(
            ConfigNode::Parse("{optimizer: {type: sgd}, learning_rate: {initial: 1.0}}", "t")
                .value());
      };
      o.new_tables = [](int shard) {
        return TableShard::FromConfig(ConfigNode::Parse(kTables, "t").value(), 0,
                                      {shard, kServers, 0});
      };
      auto task = ServerTask::Create(std::move(o), nullptr);
      ASSERT_TRUE(task.ok()) << task.status().ToString();
      tasks_.push_back(std::move(task).value());
    }
    // Each shard on its own task; the chief's values; then task 1 joins shard 0 (its copy) and
    // becomes its backup, as the chief's chain master does it.
    SetMap(1, {{0, {0}, {}}, {1, {1}, {}}, {2, {2}, {}}});
    for (int s = 0; s < kServers; ++s) {
      Message init = From("chief", 0, MessageType::kRegister, s);
      init.tensors.push_back({"w", Tensor::Filled(Shape{2}, 1.0f)});
      ASSERT_EQ(Ask(HeadOf(s), init).type, MessageType::kOk);
    }
    SetMap(2, {{0, {0}, {1}}, {1, {1}, {}}, {2, {2}, {}}});
    SetMap(3, {{0, {0, 1}, {}}, {1, {1}, {}}, {2, {2}, {}}});
  }

  Message From(const std::string& role, int task, MessageType type, int shard) {
    Message m = wire::Request(type, role, task, 7);
    m.request_id = ++next_id_;
    m.shard = shard;
    return m;
  }
  void SetMap(uint64_t epoch, std::vector<wire::Chain> chains) {
    map_ = chains;
    // Every task takes the map before what it sends is delivered, as the chief's master waits.
    std::vector<std::vector<ServerTask::Outgoing>> sent(tasks_.size());
    for (size_t t = 0; t < tasks_.size(); ++t) {
      if (tasks_[t] == nullptr) continue;
      Message m = From("chief", 0, MessageType::kShardMap, -1);
      m.map_epoch = epoch;
      m.chains = chains;
      sent[t] = tasks_[t]->Handle("chief", m);
    }
    for (size_t t = 0; t < tasks_.size(); ++t) Settle(static_cast<int>(t), std::move(sent[t]));
  }
  int HeadOf(int shard) const { return map_[shard].tasks[0]; }
  // Runs `out` (from task `from`) and all it leads to between the tasks; returns the replies to
  // clients, in the order they were released.
  std::vector<Message> Settle(int from, std::vector<ServerTask::Outgoing> out) {
    std::deque<std::pair<int, ServerTask::Outgoing>> queue;
    for (auto& o : out) queue.push_back({from, std::move(o)});
    std::vector<Message> replies;
    while (!queue.empty()) {
      auto [sender, o] = std::move(queue.front());
      queue.pop_front();
      std::vector<ServerTask::Outgoing> more;
      int at = -1;
      if (o.task >= 0) {  // a request to another task
        if (o.task >= static_cast<int>(tasks_.size()) || tasks_[o.task] == nullptr) continue;
        at = o.task;
        more = tasks_[at]->Handle("ps-" + std::to_string(sender), o.message);
      } else if (o.peer.rfind("ps-", 0) == 0) {  // a task's reply to another's request
        at = std::stoi(o.peer.substr(3));
        if (tasks_[at] == nullptr) continue;
        more = tasks_[at]->HandleServerReply(sender, o.message);
      } else {
        replies.push_back(o.message);
        continue;
      }
      for (auto& m : more) queue.push_back({at, std::move(m)});
    }
    return replies;
  }
  // The one reply to `request` sent to task `task`.
  Message Ask(int task, const Message& request) {
    std::vector<Message> replies = Settle(task, tasks_[task]->Handle("client", request));
    EXPECT_EQ(replies.size(), 1u) << wire::MessageTypeName(request.type);
    return replies.empty() ? Message{} : replies[0];
  }
  Message RowPull(int shard, const std::vector<int64_t>& ids) {
    Message m = From("worker", 1, MessageType::kRowPull, shard);
    m.text = "C1";
    m.ids = ids;
    return m;
  }
  Message RowPush(int shard, const std::vector<int64_t>& ids, uint64_t sequence, float g) {
    Message m = From("worker", 1, MessageType::kRowPush, shard);
    m.text = "C1";
    m.sequence = sequence;
    m.ids = ids;
    m.tensors.push_back({"C1", Tensor::Filled(Shape{static_cast<int64_t>(ids.size()), 2}, g)});
    return m;
  }
  // Ids of C1 that shard `shard` owns.
 public:
  static std::vector<int64_t> OwnedBy(int shard, int n) {
    std::vector<int64_t> ids;
    for (int64_t id = 0; static_cast<int>(ids.size()) < n; ++id) {
      if (RowOwner("C1", id, kServers) == shard) ids.push_back(id);
    }
    return ids;
  }

 protected:
  const SparseTable& Table(int task, int shard) {
    return *tasks_[task]->shard(shard)->tables()->Find("C1");
  }
  uint32_t Digest(int task, int shard) {
    const ParameterServer* s = tasks_[task]->shard(shard);
    return StateCrc32c(s->store(), s->tables()->all());
  }

  bool one_push_per_pull_ = false;
  std::vector<std::unique_ptr<ServerTask>> tasks_;
  std::vector<wire::Chain> map_;
  uint64_t next_id_ = 0;
};

TEST_F(ReplicatedTablesTest, ABackupHoldsEveryRowItsHeadPushedWithItsSlotsOnceTheReplyLeaves) {
  const std::vector<int64_t> ids = OwnedBy(0, 4);
  ASSERT_EQ(Ask(0, RowPull(0, ids)).type, MessageType::kOk);
  EXPECT_EQ(Table(1, 0).rows(), 0) << "a pull alone moves no row to the backup";
  // The head sends the record and holds the reply until the backup acknowledges it.
  std::vector<ServerTask::Outgoing> sent = tasks_[0]->Handle("client", RowPush(0, ids, 1, 0.5f));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].task, 1) << "the reply left before the backup held the rows";
  EXPECT_EQ(sent[0].message.type, MessageType::kReplicate);
  const std::vector<Message> replies = Settle(0, std::move(sent));
  ASSERT_EQ(replies.size(), 1u);
  ASSERT_EQ(replies[0].type, MessageType::kOk) << replies[0].text;
  ASSERT_EQ(Table(1, 0).rows(), 4);
  for (int64_t id : ids) {
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ(Table(1, 0).Row(id)[k], Table(0, 0).Row(id)[k]) << "id " << id;
      EXPECT_EQ(Table(1, 0).Slot(id, 0)[k], Table(0, 0).Slot(id, 0)[k]) << "id " << id;
    }
    EXPECT_NE(Table(0, 0).Slot(id, 0)[0], 0.1f) << "the push moved no accumulator";
  }
  EXPECT_EQ(Digest(0, 0), Digest(1, 0));
  // Without the rows in the digest, a replica missing them would pass for equal.
  EXPECT_NE(Digest(0, 0), StateCrc32c(tasks_[0]->shard(0)->store()));
}

TEST_F(ReplicatedTablesTest, AnAccumulateWindowsRowsReachTheBackupWhenTheWindowIsApplied) {
  Start(UpdateMode::kAccumulate);  // N = 2 workers
  const std::vector<int64_t> ids = OwnedBy(0, 3);
  for (int worker : {0, 1}) {
    Message pull = RowPull(0, ids);
    pull.task_index = worker;
    ASSERT_EQ(Ask(0, pull).type, MessageType::kOk);
    Message push = RowPush(0, ids, 1, 0.5f);
    push.task_index = worker;
    const Message reply = Ask(0, push);  // taken into the window: answered at once
    ASSERT_EQ(reply.type, MessageType::kOk) << reply.text;
  }
  const uint32_t unchanged = Digest(0, 0);
  for (int worker : {0, 1}) {
    Message dense = From("worker", worker, MessageType::kPush, 0);
    dense.sequence = 1;
    dense.tensors.push_back({"w", Tensor::Filled(Shape{2}, 0.1f)});
    Settle(0, tasks_[0]->Handle("client", dense));  // the second closes the window
  }
  ASSERT_EQ(tasks_[0]->shard(0)->global_step(), 1);
  // The next row request applies the window's mean and records its rows down the chain.
  ASSERT_EQ(Ask(0, RowPull(0, ids)).type, MessageType::kOk);
  EXPECT_NE(Digest(0, 0), unchanged) << "the window's rows were never applied";
  EXPECT_EQ(Table(1, 0).rows(), 3);
  EXPECT_EQ(Digest(1, 0), Digest(0, 0));
}

TEST_F(ReplicatedTablesTest, ABackupRefusesRowRequestsAndNamesTheHead) {
  const std::vector<int64_t> ids = OwnedBy(0, 2);
  for (const Message& request : {RowPull(0, ids), RowPush(0, ids, 1, 0.5f)}) {
    const Message reply = Ask(1, request);
    EXPECT_EQ(reply.error_code, StatusCode::kAborted) << reply.text;
    EXPECT_NE(reply.text.find("head: task 0"), std::string::npos) << reply.text;
  }
  EXPECT_EQ(Table(1, 0).rows(), 0);
}

TEST_F(ReplicatedTablesTest, AJoinersCopyCarriesTheRowsAndANewHeadAnswersARetryWithoutApplyingIt) {
  const std::vector<int64_t> ids = OwnedBy(0, 3);
  ASSERT_EQ(Ask(0, RowPull(0, ids)).type, MessageType::kOk);
  const Message push = RowPush(0, ids, 1, 0.5f);
  ASSERT_EQ(Ask(0, push).type, MessageType::kOk);
  // Task 2 joins shard 0 behind its tail (task 1), which copies the shard to it.
  SetMap(4, {{0, {0, 1}, {2}}, {1, {1}, {}}, {2, {2}, {}}});
  ASSERT_NE(tasks_[2]->shard(0), nullptr);
  EXPECT_EQ(Table(2, 0).rows(), 3);
  EXPECT_EQ(Digest(2, 0), Digest(0, 0));

  // Task 0 is gone: task 1 heads shard 0. The push retried there is answered, not applied again.
  tasks_[0].reset();
  SetMap(5, {{0, {1, 2}, {}}, {1, {1}, {}}, {2, {2}, {}}});
  const std::vector<float> before(Table(1, 0).Row(ids[0]), Table(1, 0).Row(ids[0]) + 2);
  const Message retried = Ask(1, push);
  EXPECT_EQ(retried.type, MessageType::kOk) << retried.text;
  EXPECT_EQ(std::vector<float>(Table(1, 0).Row(ids[0]), Table(1, 0).Row(ids[0]) + 2), before);
  // The next step's pull and push go on at the new head, and reach its backup.
  ASSERT_EQ(Ask(1, RowPull(0, ids)).type, MessageType::kOk);
  ASSERT_EQ(Ask(1, RowPush(0, ids, 2, 0.5f)).type, MessageType::kOk);
  EXPECT_NE(std::vector<float>(Table(1, 0).Row(ids[0]), Table(1, 0).Row(ids[0]) + 2), before);
  EXPECT_EQ(Digest(1, 0), Digest(2, 0));
}

// One step per pull across a failover (CI once saw a chief refused here): the pull of the step
// whose push the new head then takes fresh was answered by the head before it, so the new head
// lets in one push without a pull of its own, and from then on one step per pull again.
TEST_F(ReplicatedTablesTest, ANewHeadLetsInTheStepWhosePullItsPredecessorAnsweredThenOnePerPull) {
  one_push_per_pull_ = true;
  Start(UpdateMode::kAsync);
  auto push = [&](uint64_t sequence) {
    Message m = From("worker", 1, MessageType::kPush, 0);
    m.sequence = sequence;
    m.step = static_cast<int64_t>(sequence);
    m.tensors.push_back({"w", Tensor::Filled(Shape{2}, 0.5f)});
    return m;
  };
  const Message pull = From("worker", 1, MessageType::kPull, 0);
  ASSERT_EQ(Ask(0, pull).type, MessageType::kOk);
  ASSERT_EQ(Ask(0, push(1)).type, MessageType::kOk);  // its record reaches task 1
  const Message again = Ask(0, push(2));
  ASSERT_EQ(again.error_code, StatusCode::kPermissionDenied) << "the rule holds at the old head";
  ASSERT_EQ(Ask(0, pull).type, MessageType::kOk);  // step 1's pull, then step 2's
  ASSERT_EQ(Ask(0, pull).type, MessageType::kOk);  // (its push 2 never reached task 0)
  tasks_[0].reset();
  SetMap(4, {{0, {1}, {}}, {1, {1}, {}}, {2, {2}, {}}});
  const Message second = Ask(1, push(2));  // resent to the new head: let in after the record
  EXPECT_EQ(second.type, MessageType::kOk) << second.text;
  const Message third = Ask(1, push(3));  // its pull went to task 0
  EXPECT_EQ(third.type, MessageType::kOk) << third.text;
  const Message fourth = Ask(1, push(4));  // no pull anywhere since push 3
  EXPECT_EQ(fourth.error_code, StatusCode::kPermissionDenied) << fourth.text;
  EXPECT_NE(fourth.text.find("one step per pull"), std::string::npos) << fourth.text;
  ASSERT_EQ(Ask(1, pull).type, MessageType::kOk);
  const Message after_pull = Ask(1, push(4));
  EXPECT_EQ(after_pull.type, MessageType::kOk) << after_pull.text;
}

TEST(RowRecordTest, RowsSetOnAnotherShardAreTheSameAndAForeignIdIsRefusedChangingNothing) {
  auto New = [] {
    auto t = TableShard::FromConfig(ConfigNode::Parse(kTables, "t").value(), 0, {0, kServers, 0});
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return std::move(t).value();
  };
  auto head = New(), backup = New();
  const std::vector<int64_t> ids = ReplicatedTablesTest::OwnedBy(0, 3);
  ASSERT_TRUE(head->Pull("C1", ids, 1, /*training=*/true).ok());
  ASSERT_TRUE(head->Push("worker 1", "C1", ids, Tensor::Filled(Shape{3, 2}, 0.25f), 1).ok());
  std::map<std::string, Tensor> rows;
  head->RowsOf("C1", {ids[2], ids[0], ids[2]}, &rows);  // repeats: each row once
  ASSERT_EQ(rows.at("tables/C1/ids/part_0").dim(0), 2);
  for (const auto& [name, t] : rows) EXPECT_TRUE(TableShard::IsRowTensor(name)) << name;

  // An id shard 1 owns in place of one of shard 0's: refused whole, naming this server.
  std::map<std::string, Tensor> foreign = rows;
  foreign["tables/C1/ids/part_0"] = rows.at("tables/C1/ids/part_0").Clone();
  reinterpret_cast<int64_t*>(foreign["tables/C1/ids/part_0"].data())[1] =
      ReplicatedTablesTest::OwnedBy(1, 1)[0];
  const Status refused = backup->Upsert(foreign, 2);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("ps 0"), std::string::npos) << refused.message();
  EXPECT_EQ(backup->rows(), 0);
  // A tensor that is no row of these tables: refused too.
  std::map<std::string, Tensor> stray = rows;
  stray["tables/C9/rows/part_0"] = Tensor::Filled(Shape{1, 2}, 1.0f);
  EXPECT_FALSE(backup->Upsert(stray, 2).ok());
  EXPECT_EQ(backup->rows(), 0);

  ASSERT_TRUE(backup->Upsert(rows, 2).ok());
  EXPECT_EQ(backup->rows(), 2);
  for (int64_t id : {ids[0], ids[2]}) {
    const SparseTable& h = *head->Find("C1");
    const SparseTable& b = *backup->Find("C1");
    EXPECT_EQ(std::vector<float>(b.Row(id), b.Row(id) + 2),
              std::vector<float>(h.Row(id), h.Row(id) + 2));
    EXPECT_EQ(std::vector<float>(b.Slot(id, 0), b.Slot(id, 0) + 2),
              std::vector<float>(h.Slot(id, 0), h.Slot(id, 0) + 2));
  }
  EXPECT_EQ(backup->Find("C1")->Row(ids[1]), nullptr) << "a row the record did not carry";
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
