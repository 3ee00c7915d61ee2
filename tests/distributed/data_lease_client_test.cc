// --elastic_data over real sockets: a worker's DataLeaseClient leases a chunk from an in-process
// server 0 with a data ledger, and PsClient's next push carries the batch's uses, which the
// ledger records; a use of a chunk not leased to the worker fails the push with kAborted and
// changes nothing.
#include "worker/distributed/data_lease_client.h"

#include <gtest/gtest.h>

#include <thread>

#include "ps/server.h"
#include "ps/server_task.h"
#include "tests/distributed/sgd_variables.h"
#include "worker/distributed/ps_client.h"

namespace pstrain {
namespace {

TEST(DataLeaseClientTest, AWorkerLeasesAChunkAndItsPushCarriesTheBatchsUses) {
  auto config = ConfigNode::Parse("{optimizer: {type: sgd}, learning_rate: {initial: 1.0}}", "t");
  ps::ServerOptions o;
  o.data.examples = 100;
  o.data.chunk_size = 10;
  o.data.epochs = 1;
  o.data.seed = 9;
  auto socket = wire::ServerSocket::Bind("tcp://127.0.0.1:0");
  ASSERT_TRUE(socket.ok()) << socket.status().ToString();
  const std::string endpoint = (*socket)->endpoint();
  const std::string host_port = endpoint.substr(endpoint.find("//") + 2);
  ps::ServerTaskOptions t;  // the server role's serving loop
  t.server = o;
  t.new_store = [&config] { return ps::VariableStore::FromConfig(*config); };
  auto task = ps::ServerTask::Create(std::move(t), std::move(socket).value());
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  const ps::ParameterServer& server = *(*task)->shard(0);
  std::thread serving([&] { EXPECT_TRUE((*task)->Serve().ok()); });

  testing::SgdVariables vars;
  auto client = worker::PsClient::Connect({host_port}, "chief", 0, vars.all(), 8 << 20);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  (*client)->set_unavailable_timeout(std::chrono::seconds(30));
  ASSERT_TRUE((*client)->Initialize(0).ok());
  auto leases = worker::DataLeaseClient::Connect({host_port}, "chief", 0, {});
  ASSERT_TRUE(leases.ok()) << leases.status().ToString();

  Result<data::ChunkLease> lease = (*leases)->Lease(0);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ(lease->epoch, 0);
  EXPECT_EQ(lease->skip, 0);
  EXPECT_EQ(lease->size, 10);
  EXPECT_EQ(lease->first, lease->chunk * 10);

  vars.SetGradients(1.0f);
  (*client)->set_data_uses({{0, lease->chunk, 6}});
  auto pushed = (*client)->PushAndPull(0);
  ASSERT_TRUE(pushed.ok()) << pushed.status().ToString();
  // Another chunk's use is refused whole: the push is not applied.
  (*client)->set_data_uses({{0, (lease->chunk + 1) % 10, 1}});
  auto refused = (*client)->PushAndPull(pushed->global_step);
  EXPECT_EQ(refused.status().code(), StatusCode::kAborted) << refused.status().ToString();

  ASSERT_TRUE((*client)->Shutdown().ok());
  serving.join();
  EXPECT_EQ(server.data_ledger()->used(0), 6);
  EXPECT_EQ(server.global_step(), 1);
}

}  // namespace
}  // namespace pstrain
