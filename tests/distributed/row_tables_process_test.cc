// Embedding-table rows over the wire between real processes: two parameter servers (pstrain
// --job_name=ps) holding table C1 of tests/distributed/testdata/tables.yaml, rows sharded by id
// (common/row_owner.h), and this test as the worker pulling and pushing rows. The rows must move
// exactly as Adagrad's formula (written out here) says, live on their owner alone, and bad
// pushes must be refused with the servers still serving.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include "common/row_owner.h"
#include "common/wire/transport.h"
#include "tests/distributed/ports.h"
#include "tests/distributed/role_process.h"
#include "tests/test_env.h"
#include "worker/distributed/ps_client.h"
#include "worker/distributed/remote_tables.h"

namespace pstrain {
namespace {

using std::chrono::milliseconds;
using wire::Message;
using wire::MessageType;

constexpr int kServers = 2;
constexpr int64_t kDim = 4;
constexpr double kRate = 0.5, kInitialAccumulator = 0.1;

class TwoServers : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string hosts = "--ps_hosts=127.0.0.1:" + std::to_string(ports_[0]) +
                              ",127.0.0.1:" + std::to_string(ports_[1]);
    for (int s = 0; s < kServers; ++s) {
      const std::string dir = ::testing::TempDir() + "/rows_" + std::to_string(ports_[s]);
      std::filesystem::remove_all(dir);
      pids_[s] = testing::SpawnProcess(
          {PSTRAIN_BINARY, "--job_name=ps", "--task_index=" + std::to_string(s), hosts,
           "--worker_hosts=127.0.0.1:1,127.0.0.1:2",
           "--config=" + testing::SourceDir() + "/tests/distributed/testdata/tables.yaml",
           "--train_dir=" + dir});
      clients_[s] = std::move(
          wire::Connection::Connect("tcp://127.0.0.1:" + std::to_string(ports_[s])).value());
    }
    for (int s = 0; s < kServers; ++s) {
      Message init;
      init.type = MessageType::kRegister;
      init.role = "chief";
      init.tensors.push_back({"fc/bias", Tensor::Filled(Shape{2}, 0.5f)});
      Result<Message> r = Call(s, init);
      ASSERT_TRUE(r.ok() && r->type == MessageType::kOk) << ReplyText(r);
    }
  }
  void TearDown() override {
    for (pid_t& pid : pids_) testing::KillProcess(&pid);
  }

  // Sends as worker 0 (or the role `m` names); retries until the server is listening.
  Result<Message> Call(int server, Message m) {
    if (m.role.empty()) m.role = "worker";
    m.task_index = 0;
    m.incarnation = wire::ProcessIncarnation();
    for (int i = 0;; ++i) {
      auto r = clients_[server]->Call(m, milliseconds(i < 20 ? 500 : 5000));
      if (r.ok() || r.status().code() != StatusCode::kUnavailable || i > 20) return r;
    }
  }
  static std::string ReplyText(const Result<Message>& r) {
    return r.ok() ? r->text : r.status().ToString();
  }
  // Why the server refused `r` (an error reply arrives as the call's failure); empty if it took it.
  static std::string Refusal(const Result<Message>& r) {
    if (r.ok()) return r->type == MessageType::kError ? r->text : "";
    return r.status().message().empty() ? "refused" : r.status().message();
  }

  Result<Message> PullRows(int server, const std::vector<int64_t>& ids,
                           const std::string& role = "") {
    Message m;
    m.type = MessageType::kRowPull;
    m.role = role;
    m.text = "C1";
    m.ids = ids;
    return Call(server, m);
  }
  // The rows of `ids` from `server`, or fails the test.
  Tensor Rows(int server, const std::vector<int64_t>& ids) {
    Result<Message> r = PullRows(server, ids);
    EXPECT_TRUE(r.ok() && r->type == MessageType::kOk) << ReplyText(r);
    if (!r.ok() || r->tensors.size() != 1) return Tensor();
    EXPECT_EQ(r->tensors[0].tensor.shape(), (Shape{static_cast<int64_t>(ids.size()), kDim}));
    return r->tensors[0].tensor.Clone();
  }
  Result<Message> PushRows(int server, const std::vector<int64_t>& ids, Tensor grads) {
    Message m;
    m.type = MessageType::kRowPush;
    m.text = "C1";
    m.step = 0;
    m.sequence = ++sequence_[server];
    m.ids = ids;
    m.tensors.push_back({"C1", std::move(grads)});
    return Call(server, m);
  }
  // The first `n` ids from 0 up that `server` owns.
  static std::vector<int64_t> Owned(int server, int n) {
    std::vector<int64_t> ids;
    for (int64_t id = 0; static_cast<int>(ids.size()) < n; ++id) {
      if (RowOwner("C1", id, kServers) == server) ids.push_back(id);
    }
    return ids;
  }
  bool Alive(int s) { return waitpid(pids_[s], nullptr, WNOHANG) == 0; }

  int ports_[kServers] = {testing::PickPort(), testing::PickPort()};
  pid_t pids_[kServers] = {-1, -1};
  uint64_t sequence_[kServers] = {0, 0};
  std::unique_ptr<wire::Connection> clients_[kServers];
};

Tensor Gradient(int64_t rows, float scale) {
  Tensor g(Shape{rows, kDim});
  for (int64_t i = 0; i < g.size(); ++i) g[i] = scale * static_cast<float>(i % 5 - 2);
  return g;
}

TEST_F(TwoServers, PushedRowsMoveByAdagradOnTheirOwnerOnly) {
  for (int s = 0; s < kServers; ++s) {
    const std::vector<int64_t> ids = Owned(s, 3);
    const Tensor before = Rows(s, ids);
    ASSERT_EQ(before.size(), 3 * kDim);
    const Tensor g1 = Gradient(3, 0.5f), g2 = Gradient(3, -1.5f);
    Result<Message> pushed = PushRows(s, ids, g1);
    ASSERT_TRUE(pushed.ok() && pushed->type == MessageType::kOk) << ReplyText(pushed);
    Rows(s, ids);  // a worker pulls before each push (one row push per pull)
    pushed = PushRows(s, ids, g2);
    ASSERT_TRUE(pushed.ok() && pushed->type == MessageType::kOk) << ReplyText(pushed);
    const Tensor after = Rows(s, ids);
    int moved = 0;
    for (int64_t i = 0; i < after.size(); ++i) {
      double value = before[i], accumulator = kInitialAccumulator;
      for (double g : {static_cast<double>(g1[i]), static_cast<double>(g2[i])}) {
        accumulator += g * g;
        value -= kRate * g / std::sqrt(accumulator);
      }
      EXPECT_NEAR(after[i], value, 1e-6) << "server " << s << " element " << i;
      moved += after[i] != before[i];
    }
    EXPECT_GT(moved, 0) << "server " << s << " applied nothing";
  }
}

TEST_F(TwoServers, AnIdSentToTheWrongServerIsRefusedAndChangesNothing) {
  const std::vector<int64_t> mine = Owned(0, 2), theirs = Owned(1, 1);
  const Tensor rows = Rows(0, mine);
  const std::string wrong = Refusal(PullRows(0, {mine[0], theirs[0]}));
  EXPECT_NE(wrong.find("id " + std::to_string(theirs[0])), std::string::npos) << wrong;
  EXPECT_NE(wrong.find("belongs to ps 1, not to ps 0"), std::string::npos) << wrong;
  const std::string pushed = Refusal(PushRows(0, {mine[1], theirs[0]}, Gradient(2, 1.0f)));
  EXPECT_NE(pushed.find("belongs to ps 1"), std::string::npos) << pushed;
  const Tensor again = Rows(0, mine);
  for (int64_t i = 0; i < rows.size(); ++i) EXPECT_EQ(again[i], rows[i]) << "element " << i;
  // The row lives on its owner, untouched by the refused push.
  const Tensor owned = Rows(1, theirs);
  for (int64_t i = 0; i < owned.size(); ++i) EXPECT_EQ(owned[i], 0.0f);
}

TEST_F(TwoServers, BadRowPushesAreRefusedWithTheRunIntact) {
  const std::vector<int64_t> ids = Owned(1, 2);
  const Tensor rows = Rows(1, ids);
  // The wrong dimension, and a NaN: refused by the server.
  const std::string wide = Refusal(PushRows(1, ids, Tensor(Shape{2, kDim + 1})));
  EXPECT_NE(wide.find("expected [2,4]"), std::string::npos) << wide;
  Tensor nan = Gradient(2, 1.0f);
  nan[3] = std::nanf("");
  const std::string not_finite = Refusal(PushRows(1, ids, nan));
  EXPECT_NE(not_finite.find("not finite"), std::string::npos) << not_finite;
  // A negative id never leaves this process: Encode refuses what the server would.
  const std::string negative = Refusal(PushRows(1, {ids[0], -3}, Gradient(2, 1.0f)));
  EXPECT_NE(negative.find("id -3 at position 1"), std::string::npos) << negative;
  // An evaluator may read rows but not push them.
  Message evaluator_push;
  evaluator_push.type = MessageType::kRowPush;
  evaluator_push.role = "evaluator";
  evaluator_push.text = "C1";
  evaluator_push.sequence = 1;
  evaluator_push.ids = ids;
  evaluator_push.tensors.push_back({"C1", Gradient(2, 1.0f)});
  const std::string evaluator = Refusal(Call(1, evaluator_push));
  EXPECT_NE(evaluator.find("evaluator 0 may not send row push"), std::string::npos) << evaluator;
  EXPECT_EQ(Refusal(PullRows(1, ids, "evaluator")), "");
  EXPECT_TRUE(Alive(0) && Alive(1));
  const Tensor again = Rows(1, ids);
  for (int64_t i = 0; i < rows.size(); ++i) EXPECT_EQ(again[i], rows[i]) << "element " << i;
  // Still serving: a good push goes through and moves the rows.
  EXPECT_EQ(Refusal(PushRows(1, ids, Gradient(2, 1.0f))), "");
  const Tensor moved = Rows(1, ids);
  EXPECT_NE(moved.ToVector(), rows.ToVector());
}

// A worker's RemoteTables over PsClient's router, against the two processes: each embedding
// layer's rows come from their owners and its gradients move them there, as the formula says.
TEST_F(TwoServers, RemoteTablesTrainRowsOnTheirOwnersThroughTheRouter) {
  auto model_node = ConfigNode::Parse(
      "{inputs: [{name: ids, shape: [4]}], layers: [{name: emb, type: embedding, inputs: ids, "
      "dimension: 4, rows: 6, table: C1}, {name: fc, type: fully_connected, units: 2}, "
      "{name: loss, type: softmax_cross_entropy}]}",
      "model.yaml");
  auto model = worker::Model::FromConfig(model_node.value());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto config =
      ConfigNode::LoadFile(testing::SourceDir() + "/tests/distributed/testdata/tables.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto client = worker::PsClient::Connect(
      {"127.0.0.1:" + std::to_string(ports_[0]), "127.0.0.1:" + std::to_string(ports_[1])},
      "worker", 1, {}, 8 << 20);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto tables =
      worker::RemoteTables::Create(config->Child("tables").value(), model->get(), kServers,
                                   [&](std::vector<std::pair<int, Message>> requests) {
                                     return (*client)->ExchangeWithShards(std::move(requests));
                                   });
  ASSERT_TRUE(tables.ok()) << tables.status().ToString();
  worker::Variable* rows = (*model)->FindVariable("emb/rows");
  worker::FeatureBatch batch;
  batch.ids = {Owned(0, 2)};
  batch.ids[0].push_back(Owned(1, 1)[0]);
  batch.ids[0].push_back(Owned(1, 2)[1]);
  ASSERT_TRUE((*tables)->Gather(batch, 0, true).ok());
  const std::vector<float> before = rows->value.ToVector();
  for (int64_t i = 0; i < rows->grad.size(); ++i) rows->grad[i] = 0.1f * static_cast<float>(i % 7);
  Status applied = (*tables)->Apply(batch, 0);
  ASSERT_TRUE(applied.ok()) << applied.ToString();
  ASSERT_TRUE((*tables)->Gather(batch, 1, true).ok());
  int moved = 0;
  for (int64_t i = 0; i < 4 * kDim; ++i) {
    const double g = rows->grad[i];
    const double want = before[i] - kRate * g / std::sqrt(kInitialAccumulator + g * g);
    EXPECT_NEAR(rows->value[i], want, 1e-6) << "element " << i;
    moved += rows->value[i] != before[i];
  }
  EXPECT_GT(moved, 0);
  // Each row is where its owner says: pulled straight from it, it is the row the layer holds.
  for (int s = 0; s < kServers; ++s) {
    for (size_t k = 0; k < batch.ids[0].size(); ++k) {
      if (RowOwner("C1", batch.ids[0][k], kServers) != s) continue;
      const Tensor row = Rows(s, {batch.ids[0][k]});
      for (int64_t j = 0; j < kDim; ++j) EXPECT_EQ(row[j], rows->value[k * kDim + j]);
    }
  }
}

// A worker's key moves a row only by the round trip a real step makes: one row push per row pull,
// of the ids that pull named (ps/row_pull_ledger.h). Before, 50 pushes after one pull moved the
// row 50 Adagrad steps.
TEST_F(TwoServers, AWorkerKeyMovesRowsOncePerPullAndOnlyTheRowsPulled) {
  const std::vector<int64_t> ids = Owned(0, 2), other = {Owned(0, 3)[2]};
  const Tensor before = Rows(0, ids);
  const Tensor g = Gradient(2, 1.0f);
  ASSERT_EQ(Refusal(PushRows(0, ids, g)), "");
  int refused = 0;
  for (int i = 0; i < 49; ++i) {
    const std::string why = Refusal(PushRows(0, ids, g));
    if (why.find("one row push per pull") != std::string::npos) ++refused;
  }
  EXPECT_EQ(refused, 49);
  const Tensor after = Rows(0, ids);  // this pull opens one more push
  for (int64_t i = 0; i < after.size(); ++i) {
    const double accumulator = kInitialAccumulator + double{g[i]} * g[i];
    EXPECT_NEAR(after[i], before[i] - kRate * g[i] / std::sqrt(accumulator), 1e-6)
        << "element " << i << ": moved by more than one step";
  }
  // A row the open pull did not name is refused, and leaves the pull open for its own rows.
  const std::string unpulled = Refusal(PushRows(0, other, Gradient(1, 1.0f)));
  EXPECT_NE(unpulled.find("follows no row pull of its ids"), std::string::npos) << unpulled;
  EXPECT_EQ(Refusal(PushRows(0, ids, g)), "");
  EXPECT_NE(Refusal(PushRows(0, ids, g)), "");
  EXPECT_TRUE(Alive(0) && Alive(1));
}

}  // namespace
}  // namespace pstrain
