// A worker's embedding rows held by two servers' table shards (in-process, the requests passed
// through the wire codec): each id's pull and push goes to its owner only, and training against
// them moves every row exactly as the one-process tables do.
#include "worker/distributed/remote_tables.h"

#include <gtest/gtest.h>

#include "common/row_owner.h"
#include "common/wire/codec.h"
#include "ps/table_shard.h"
#include "worker/training/embedding_tables.h"

namespace pstrain {
namespace worker {
namespace {

using wire::Message;
using wire::MessageType;

constexpr int kServers = 2;
const char* kTables =
    "{optimizer: {type: adagrad}, learning_rate: {initial: 0.3}, "
    "list: [{name: t, dimension: 2, max_rows: 100, initializer: {type: uniform, scale: 0.5}}]}";

std::unique_ptr<Model> TinyModel() {
  auto node = ConfigNode::Parse(
      "{inputs: [{name: ids, shape: [3]}], layers: [{name: emb, type: embedding, inputs: ids, "
      "dimension: 2, rows: 6, table: t}, {name: fc, type: fully_connected, units: 2}, "
      "{name: loss, type: softmax_cross_entropy}]}",
      "model.yaml");
  auto model = Model::FromConfig(node.value());
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return std::move(model).value();
}

FeatureBatch Batch(std::vector<int64_t> distinct) {
  FeatureBatch b;
  b.ids = {std::move(distinct)};
  return b;
}

// Two table shards behind an exchange that encodes and decodes every request and reply, and
// records which server each id was sent to.
class TwoShards {
 public:
  TwoShards() {
    for (int s = 0; s < kServers; ++s) {
      shards_.push_back(
          ps::TableShard::FromConfig(ConfigNode::Parse(kTables, "t").value(), 0, {s, kServers, 0})
              .value());
    }
  }
  RemoteTables::Exchange exchange() {
    return [this](std::vector<std::pair<int, Message>> requests) {
      std::vector<Message> replies;
      for (auto& [server, m] : requests) {
        m.role = "worker";
        m.task_index = 0;
        m.incarnation = 5;
        Message in = wire::Decode(wire::FramesOf(wire::Encode(m).value())).value();
        for (int64_t id : in.ids) sent_to_.push_back({id, server});
        replies.push_back(Answer(server, in));
      }
      return Result<std::vector<Message>>(std::move(replies));
    };
  }
  const std::vector<std::pair<int64_t, int>>& sent_to() const { return sent_to_; }

 private:
  Message Answer(int server, const Message& in) {
    Message reply;
    reply.type = MessageType::kOk;
    Status s;
    if (in.type == MessageType::kRowPull) {
      Result<Tensor> rows = shards_[server]->Pull(in.text, in.ids, step_, true);
      if (rows.ok()) reply.tensors.push_back({in.text, *rows});
      s = rows.status();
    } else {
      s = shards_[server]->Push("worker 0", in.text, in.ids, in.tensors[0].tensor, step_++);
    }
    return s.ok() ? reply : wire::ErrorReply(in, s);
  }

  std::vector<std::unique_ptr<ps::TableShard>> shards_;
  std::vector<std::pair<int64_t, int>> sent_to_;
  int64_t step_ = 0;
};

TEST(RemoteTablesTest, EachIdGoesToItsOwnerAndRowsMoveAsInOneProcess) {
  auto remote_model = TinyModel(), local_model = TinyModel();
  TwoShards servers;
  auto remote = RemoteTables::Create(ConfigNode::Parse(kTables, "t").value(), remote_model.get(),
                                     kServers, servers.exchange());
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  auto local = EmbeddingTables::Create(ConfigNode::Parse(kTables, "t").value(), local_model.get());
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  Variable* remote_rows = remote_model->FindVariable("emb/rows");
  Variable* local_rows = local_model->FindVariable("emb/rows");
  EXPECT_TRUE((*remote)->Holds(remote_rows));
  EXPECT_FALSE((*remote)->Holds(remote_model->FindVariable("fc/weights")));
  const std::vector<std::vector<int64_t>> batches = {{3, 10, 7}, {7, 11}, {3, 10, 11}};
  for (size_t step = 0; step < batches.size(); ++step) {
    const FeatureBatch batch = Batch(batches[step]);
    ASSERT_TRUE((*remote)->Gather(batch, step, true).ok());
    ASSERT_TRUE((*local)->Gather(batch, step, true).ok());
    EXPECT_EQ(remote_rows->value.ToVector(), local_rows->value.ToVector()) << "step " << step;
    for (Variable* v : {remote_rows, local_rows}) {
      for (int64_t i = 0; i < v->grad.size(); ++i) v->grad[i] = 0.1f * (i + 1) * (step + 1);
    }
    ASSERT_TRUE((*remote)->Apply(batch, step).ok());
    ASSERT_TRUE((*local)->Apply(batch, step).ok());
  }
  const FeatureBatch all = Batch({3, 7, 10, 11});
  ASSERT_TRUE((*remote)->Gather(all, 3, true).ok());
  ASSERT_TRUE((*local)->Gather(all, 3, true).ok());
  EXPECT_EQ(remote_rows->value.ToVector(), local_rows->value.ToVector());
  int servers_used[kServers] = {0, 0};
  for (const auto& [id, server] : servers.sent_to()) {
    EXPECT_EQ(server, RowOwner("t", id, kServers)) << "id " << id;
    ++servers_used[server];
  }
  EXPECT_GT(servers_used[0], 0);
  EXPECT_GT(servers_used[1], 0);
}

TEST(RemoteTablesTest, AServersRefusalIsAnErrorNamingIt) {
  auto model = TinyModel();
  RemoteTables::Exchange refusing = [](std::vector<std::pair<int, Message>> requests) {
    std::vector<Message> replies;
    for (auto& [server, m] : requests) {
      replies.push_back(wire::ErrorReply(m, ResourceExhausted("table 't' is full")));
    }
    return Result<std::vector<Message>>(std::move(replies));
  };
  auto remote = RemoteTables::Create(ConfigNode::Parse(kTables, "t").value(), model.get(), kServers,
                                     refusing);
  ASSERT_TRUE(remote.ok());
  Status s = (*remote)->Gather(Batch({1}), 0, true);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("row pull to ps " + std::to_string(RowOwner("t", 1, kServers))),
            std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("table 't' is full"), std::string::npos);
  Status wide = (*remote)->Gather(Batch({1, 2, 3, 4, 5, 6, 7}), 0, true);
  EXPECT_NE(wide.message().find("7 distinct ids, more than its rows 6"), std::string::npos)
      << wide.ToString();
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
