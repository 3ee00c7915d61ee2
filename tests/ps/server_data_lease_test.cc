// Shard 0's data ledger behind ParameterServer::Handle (ps/server_data_lease.cc): dataLease
// answered with a chunk, a push's uses recorded or refused whole, a worker's leases freed when it
// says goodbye, goes silent or restarts, and everything as before when the server has no data
// size.
#include <gtest/gtest.h>

#include <string>

#include "common/wire/request.h"
#include "ps/server.h"
#include "tests/ps/server_test_util.h"

namespace pstrain {
namespace ps {
namespace {

using wire::Message;
using wire::MessageType;

std::unique_ptr<ParameterServer> MakeServer(int64_t examples, int task = 0) {
  ServerOptions o;
  o.task_index = task;
  o.num_ps = 2;
  o.num_workers = 2;
  o.peer_timeout = std::chrono::milliseconds(1000);
  o.data.examples = examples;
  o.data.chunk_size = 10;
  o.data.epochs = 1;
  o.data.seed = 5;
  return InitializedSgdServer(o, {{"w", Tensor::Filled(Shape{2}, 10.0f)}}, 7);
}

Message Lease(int task, uint64_t incarnation, int64_t epoch) {
  Message m = wire::Request(MessageType::kDataLease, "worker", task, incarnation);
  m.request_id = 40;
  m.value = epoch;
  return m;
}

Message Push(int task, uint64_t incarnation, uint64_t sequence, std::vector<wire::ChunkUse> uses) {
  Message m = wire::Request(MessageType::kPush, "worker", task, incarnation);
  m.sequence = sequence;
  m.request_id = 50 + sequence;
  m.tensors.push_back({"w", Tensor::Filled(Shape{2}, 1.0f)});
  m.uses = std::move(uses);
  return m;
}

Message Goodbye(int task, uint64_t incarnation) {
  Message m = wire::Request(MessageType::kHeartbeat, "worker", task, incarnation);
  m.text = "goodbye";
  return m;
}

float Value(ParameterServer* server) { return server->store().Value("w")[0]; }

TEST(ServerDataLeaseTest, ShardZeroLeasesAChunkAndRecordsThePushesUses) {
  auto server = MakeServer(95);
  ASSERT_NE(server->data_ledger(), nullptr);
  auto out = server->Handle("w1", Lease(1, 100, 0));
  ASSERT_EQ(out.size(), 1u);
  const Message& reply = out[0].message;
  ASSERT_EQ(reply.type, MessageType::kOk) << reply.text;
  EXPECT_EQ(reply.request_id, 40u);
  ASSERT_EQ(reply.uses.size(), 1u);
  const wire::ChunkUse lease = reply.uses[0];
  EXPECT_EQ(lease.epoch, 0);
  EXPECT_EQ(lease.count, 0);  // nothing to skip
  EXPECT_EQ(reply.value, lease.chunk == 9 ? 5 : 10);
  EXPECT_EQ(reply.sequence, static_cast<uint64_t>(lease.chunk * 10));
  EXPECT_EQ(reply.step, server->global_step());

  out = server->Handle("w1", Push(1, 100, 1, {{0, lease.chunk, 3}}));
  ASSERT_EQ(out.at(0).message.type, MessageType::kOk) << out[0].message.text;
  EXPECT_EQ(server->data_ledger()->used(0), 3);
  // A retry of that push is answered, not counted again.
  out = server->Handle("w1", Push(1, 100, 1, {{0, lease.chunk, 3}}));
  ASSERT_EQ(out.at(0).message.type, MessageType::kOk);
  EXPECT_EQ(server->data_ledger()->used(0), 3);
  EXPECT_FLOAT_EQ(Value(server.get()), 9.0f);

  // Worker 1 says goodbye: worker 2's next lease is its chunk, 3 examples in.
  server->Handle("w1", Goodbye(1, 100));
  out = server->Handle("w2", Lease(2, 200, 0));
  ASSERT_EQ(out.at(0).message.type, MessageType::kOk) << out[0].message.text;
  ASSERT_EQ(out[0].message.uses.size(), 1u);
  EXPECT_EQ(out[0].message.uses[0].chunk, lease.chunk);
  EXPECT_EQ(out[0].message.uses[0].count, 3);
}

TEST(ServerDataLeaseTest, APushNamingAChunkNotLeasedToItsSenderIsAbortedAndChangesNothing) {
  auto server = MakeServer(100);
  auto out = server->Handle("w1", Lease(1, 100, 0));
  const int64_t chunk = out.at(0).message.uses.at(0).chunk;
  const int64_t other = (chunk + 1) % 10;
  out = server->Handle("w1", Push(1, 100, 1, {{0, chunk, 2}, {0, other, 1}}));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.type, MessageType::kError);
  EXPECT_EQ(out[0].message.error_code, StatusCode::kAborted);
  EXPECT_NE(out[0].message.text.find("not leased to it"), std::string::npos) << out[0].message.text;
  EXPECT_FLOAT_EQ(Value(server.get()), 10.0f);
  EXPECT_EQ(server->global_step(), 0);
  EXPECT_EQ(server->data_ledger()->used(0), 0);
  // The same sequence, its uses right, is then taken (the refused push was not applied).
  out = server->Handle("w1", Push(1, 100, 1, {{0, chunk, 2}}));
  EXPECT_EQ(out.at(0).message.type, MessageType::kOk) << out[0].message.text;
  EXPECT_EQ(server->data_ledger()->used(0), 2);
  // A count beyond the chunk is named.
  out = server->Handle("w1", Push(1, 100, 2, {{0, chunk, 9}}));
  EXPECT_EQ(out.at(0).message.error_code, StatusCode::kInvalidArgument);
  EXPECT_NE(out[0].message.text.find("which has 8 left of 10"), std::string::npos)
      << out[0].message.text;
}

TEST(ServerDataLeaseTest, ASilentWorkersLeasesAreRevokedAndARestartedOnesForgotten) {
  auto server = MakeServer(100);
  const int64_t silent = server->Handle("w1", Lease(1, 100, 0)).at(0).message.uses.at(0).chunk;
  server->CheckPeers(std::chrono::steady_clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(server->peers().at("worker 1").missing);
  EXPECT_TRUE(server->data_ledger()->leases_of("worker 1").empty());
  // It was only slow: its push of the old chunk is aborted, and so is its next lease, once.
  auto out = server->Handle("w1", Push(1, 100, 1, {{0, silent, 1}}));
  EXPECT_EQ(out.at(0).message.error_code, StatusCode::kAborted) << out[0].message.text;
  out = server->Handle("w1", Lease(1, 100, 0));
  EXPECT_EQ(out.at(0).message.error_code, StatusCode::kAborted) << out[0].message.text;
  out = server->Handle("w1", Lease(1, 100, 0));
  ASSERT_EQ(out.at(0).message.type, MessageType::kOk) << out[0].message.text;
  EXPECT_EQ(out[0].message.uses.at(0).chunk, silent);
  // A new process of worker 1 leases afresh, its predecessor's lease freed.
  out = server->Handle("w1b", Lease(1, 300, 0));
  ASSERT_EQ(out.at(0).message.type, MessageType::kOk) << out[0].message.text;
  EXPECT_EQ(out[0].message.uses.at(0).chunk, silent);
  EXPECT_EQ(server->data_ledger()->leases_of("worker 1").size(), 1u);
}

TEST(ServerDataLeaseTest, AfterTheLastEpochALeaseIsAnsweredOutOfRange) {
  auto server = MakeServer(10);
  auto out = server->Handle("w1", Lease(1, 100, 0));
  const int64_t chunk = out.at(0).message.uses.at(0).chunk;
  server->Handle("w1", Push(1, 100, 1, {{0, chunk, 10}}));
  EXPECT_TRUE(server->data_ledger()->complete(0));
  out = server->Handle("w1", Lease(1, 100, 1));
  EXPECT_EQ(out.at(0).message.type, MessageType::kError);
  EXPECT_EQ(out[0].message.error_code, StatusCode::kOutOfRange) << out[0].message.text;
}

TEST(ServerDataLeaseTest, WithoutTheDataSizeALeaseIsRefusedAsBeforeAndUsesAreIgnored) {
  auto server = MakeServer(0);
  EXPECT_EQ(server->data_ledger(), nullptr);
  auto out = server->Handle("w1", Lease(1, 100, 0));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.error_code, StatusCode::kFailedPrecondition);
  EXPECT_NE(out[0].message.text.find("replication is not enabled on this server"),
            std::string::npos)
      << out[0].message.text;
  EXPECT_EQ(server->peers().count("worker 1"), 0u) << "a refused sender is not a peer";
  out = server->Handle("w1", Push(1, 100, 1, {{0, 3, 5}}));
  EXPECT_EQ(out.at(0).message.type, MessageType::kOk) << out[0].message.text;
  EXPECT_FLOAT_EQ(Value(server.get()), 9.0f);
}

TEST(ServerDataLeaseTest, OnlyShardZeroKeepsTheLedger) {
  auto server = MakeServer(100, /*task=*/1);
  EXPECT_EQ(server->data_ledger(), nullptr);
  EXPECT_EQ(server->Handle("w1", Lease(1, 100, 0)).at(0).message.error_code,
            StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
