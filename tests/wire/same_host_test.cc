// Same-host ipc:// sockets (common/wire/same_host.h) over real Unix sockets: where the endpoint
// is and when there is none; a server listening on TCP (CURVE) and ipc (PLAIN) at once answers
// each client on the socket it came in by, naming each by its key; a client with another
// cluster's secret key, with a name that is not its key's, or with no keys is refused on the ipc
// socket, and the server counts it and goes on serving.
#include "common/wire/same_host.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/wire/transport.h"

namespace pstrain {
namespace wire {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kWait(10000);

class SameHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/pstrain-same-host-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    ASSERT_TRUE(WriteClusterKeys(dir_ + "/keys", 1, 2, 0).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  ClusterKeys Keys(const std::string& job, int task, const std::string& keys = "keys") {
    const std::string own = dir_ + "/" + keys + "/" + job + "-" + std::to_string(task);
    Result<ClusterKeys> k = LoadClusterKeys(own, job, task);
    EXPECT_TRUE(k.ok()) << k.status().ToString();
    return k.ok() ? k.value() : ClusterKeys{};
  }
  std::string dir_;
};

// Serves one message on `server` and answers it with the sender's authenticated name.
void AnswerOne(ServerSocket* server) {
  Result<Incoming> in = server->Receive(kWait);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  ASSERT_TRUE(in->message.ok()) << in->message.status().ToString();
  Message reply;
  reply.request_id = in->message->request_id;
  reply.text = in->identity;
  ASSERT_TRUE(server->Reply(in->peer, reply).ok());
}

Message Heartbeat() {
  Message m;
  m.type = MessageType::kHeartbeat;
  return m;
}

TEST_F(SameHostTest, TheEndpointIsInTheServersPrivateKeyDirectoryAndOnlyThere) {
  const ClusterKeys worker = Keys("worker", 1);
  const std::string expected = "ipc://" + dir_ + "/keys/ps-0/ps.sock";
  EXPECT_EQ(SameHostEndpoint(worker, 0), expected);
  EXPECT_EQ(SameHostEndpoint(Keys("ps", 0), 0), expected) << "the server finds the same path";
  EXPECT_EQ(SameHostEndpoint(worker, 1), "") << "no ps-1 directory";
  EXPECT_EQ(SameHostEndpoint(ClusterKeys{}, 0), "") << "plaintext: no keys, no socket";
  ClusterKeys off = worker;
  off.same_host_ipc = false;
  EXPECT_EQ(SameHostEndpoint(off, 0), "");
  ASSERT_EQ(chmod((dir_ + "/keys/ps-0").c_str(), 0750), 0);
  EXPECT_EQ(SameHostEndpoint(worker, 0), "") << "a directory others may enter is not used";
  ASSERT_EQ(chmod((dir_ + "/keys/ps-0").c_str(), 0700), 0);

  // A Unix socket's address holds 107 bytes: a longer path stays on TCP.
  const std::string deep = "keys" + std::string(100, 'k');
  std::filesystem::rename(dir_ + "/keys", dir_ + "/" + deep);
  EXPECT_EQ(SameHostEndpoint(Keys("worker", 1, deep), 0), "");
}

TEST_F(SameHostTest, OnlyALoopbackServerIsReachedOverTheSameHostSocket) {
  const ClusterKeys worker = Keys("worker", 0);
  Result<ServerRoute> local = RouteToServer(worker, 0, "127.0.0.1:2222");
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  EXPECT_TRUE(local->same_host());
  EXPECT_EQ(local->security.own_name, "worker-0");
  Result<ServerRoute> remote = RouteToServer(worker, 0, "10.1.2.3:2222");
  ASSERT_TRUE(remote.ok());
  EXPECT_EQ(remote->endpoint, "tcp://10.1.2.3:2222");
  EXPECT_EQ(remote->security.server_key, worker.ps_keys[0]) << "CURVE to another host";
  Result<ServerRoute> plain = RouteToServer(ClusterKeys{}, 0, "127.0.0.1:2222");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->endpoint, "tcp://127.0.0.1:2222") << "no keys: plaintext TCP as before";
}

TEST_F(SameHostTest, AServerAnswersTcpAndSameHostClientsEachOnItsOwnSocketByKeyName) {
  const ClusterKeys ps = Keys("ps", 0);
  Result<std::unique_ptr<ServerSocket>> server =
      ServerSocket::Bind("tcp://127.0.0.1:0", {}, ps.ForServer());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_TRUE((*server)->ListenAlsoOn(SameHostEndpoint(ps, 0)).ok());

  Result<ServerRoute> route = RouteToServer(Keys("worker", 1), 0, "127.0.0.1:1");
  ASSERT_TRUE(route.ok() && route->same_host());
  auto local = Connection::Connect(route->endpoint, {}, route->security);
  auto remote =
      Connection::Connect((*server)->endpoint(), {}, Keys("worker", 0).ForClientOf(0).value());
  ASSERT_TRUE(local.ok() && remote.ok());
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE((*local)->Send(Heartbeat()).ok());
    ASSERT_TRUE((*remote)->Send(Heartbeat()).ok());
    AnswerOne(server->get());
    AnswerOne(server->get());
    Result<Message> over_ipc = (*local)->Receive(kWait);
    Result<Message> over_tcp = (*remote)->Receive(kWait);
    ASSERT_TRUE(over_ipc.ok()) << over_ipc.status().ToString();
    ASSERT_TRUE(over_tcp.ok()) << over_tcp.status().ToString();
    EXPECT_EQ(over_ipc->text, "worker-1") << "the identity its key proved, over ipc";
    EXPECT_EQ(over_tcp->text, "worker-0") << "and over CURVE";
  }
  EXPECT_EQ((*server)->refused_handshakes(), 0);
}

TEST_F(SameHostTest, AClientThatCannotProveItsKeyIsRefusedOnTheSameHostSocket) {
  const ClusterKeys ps = Keys("ps", 0);
  auto server = ServerSocket::Bind("tcp://127.0.0.1:0", {}, ps.ForServer());
  ASSERT_TRUE(server.ok());
  const std::string local = SameHostEndpoint(ps, 0);
  ASSERT_TRUE((*server)->ListenAlsoOn(local).ok());

  ASSERT_TRUE(WriteClusterKeys(dir_ + "/other", 1, 2, 0).ok());
  Security stranger = Keys("worker", 1, "other").ForClientOf(0).value();  // another cluster's
  Security impostor = Keys("worker", 1).ForClientOf(0).value();
  impostor.own_name = "worker-0";  // worker 1's secret key, worker 0's name
  const Security nobody;           // no keys at all
  int refused_clients = 0;
  for (const Security* security : std::vector<const Security*>{&stranger, &impostor, &nobody}) {
    auto client = Connection::Connect(local, {}, *security);
    ASSERT_TRUE(client.ok());
    // A handshake over ipc is quick: the client may have seen its refusal before it sends, and
    // then the send fails saying so rather than queue a message nobody will take.
    const Status sent = (*client)->Send(Heartbeat());
    if (!sent.ok()) {
      EXPECT_EQ(sent.code(), StatusCode::kFailedPrecondition) << sent.ToString();
      EXPECT_NE(sent.message().find("authentication refused by " + local), std::string::npos)
          << sent.ToString();
    }
    // The server reads nothing from it (Receive times out) and counts the refusal.
    Result<Incoming> in = (*server)->Receive(milliseconds(1500));
    EXPECT_FALSE(in.ok()) << "a message from an unproved client reached the server";
    Result<Message> reply = (*client)->Receive(milliseconds(200));
    EXPECT_FALSE(reply.ok());
    ++refused_clients;
    EXPECT_GE((*server)->refused_handshakes(), refused_clients) << security->own_name;
  }
  // And it still serves a client that proves its key.
  Result<ServerRoute> route = RouteToServer(Keys("worker", 0), 0, "localhost:1");
  ASSERT_TRUE(route.ok() && route->same_host());
  auto good = Connection::Connect(route->endpoint, {}, route->security);
  ASSERT_TRUE(good.ok());
  ASSERT_TRUE((*good)->Send(Heartbeat()).ok());
  AnswerOne(server->get());
  Result<Message> reply = (*good)->Receive(kWait);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->text, "worker-0");
}

}  // namespace
}  // namespace wire
}  // namespace pstrain
