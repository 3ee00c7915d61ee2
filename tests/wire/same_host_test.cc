// Same-host ipc:// sockets (common/wire/same_host.h) over real Unix sockets: where the endpoint
// is and when there is none; a server listening on TCP (CURVE) and ipc (PLAIN) at once answers
// each client on the socket it came in by, naming each by its key; a client with another
// cluster's secret key, with a name that is not its key's, or with no keys is refused on the ipc
// socket, and the server counts it and goes on serving. A process bound at the server's socket in
// its place collects the client's proof, which is neither its secret key nor good elsewhere.
#include "common/wire/same_host.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <zmq.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/wire/same_host_proof.h"
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

TEST(SameHostProofTest, BothEndsMakeTheSameProofAndItBindsTheClientsNameAndTheServer) {
  char ps[41], ps_secret[41], worker[41], worker_secret[41], other[41], other_secret[41];
  ASSERT_EQ(zmq_curve_keypair(ps, ps_secret), 0);
  ASSERT_EQ(zmq_curve_keypair(worker, worker_secret), 0);
  ASSERT_EQ(zmq_curve_keypair(other, other_secret), 0);
  const std::string client = SameHostProof(worker_secret, ps, "worker-1").value();
  EXPECT_EQ(client, SameHostProof(ps_secret, worker, "worker-1").value()) << "X25519 is symmetric";
  EXPECT_EQ(client.size(), 40u);
  EXPECT_NE(client, std::string(worker_secret));
  EXPECT_NE(client, SameHostProof(worker_secret, ps, "worker-0").value()) << "another name";
  EXPECT_NE(client, SameHostProof(worker_secret, other, "worker-1").value()) << "another server";
  EXPECT_TRUE(SameProof(client, SameHostProof(ps_secret, worker, "worker-1").value()));
  EXPECT_FALSE(SameProof(client, SameHostProof(other_secret, worker, "worker-1").value()));
  EXPECT_FALSE(SameHostProof("short", ps, "worker-1").ok());
}

// Reads exactly `n` bytes from `fd` within 10 s; false on a timeout or a closed socket.
bool ReadFully(int fd, char* out, size_t n) {
  for (size_t got = 0; got < n;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) return false;
    const ssize_t r = read(fd, out + got, n - got);
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

TEST_F(SameHostTest, AProcessBoundInTheServersPlaceCollectsNoSecretKey) {
  // The impostor: a plain Unix socket at the server's same-host path, speaking just enough
  // ZMTP 3 (RFC 23) to read the client's PLAIN HELLO, where a password travels in the clear.
  const ClusterKeys ps = Keys("ps", 0);
  const std::string local = SameHostEndpoint(ps, 0);
  ASSERT_FALSE(local.empty());
  const std::string path = local.substr(6);
  const int listener = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 1), 0);

  const ClusterKeys worker = Keys("worker", 1);
  Result<ServerRoute> route = RouteToServer(worker, 0, "localhost:1");
  ASSERT_TRUE(route.ok() && route->same_host());
  auto client = Connection::Connect(route->endpoint, {}, route->security);
  ASSERT_TRUE(client.ok());
  (void)(*client)->Send(Heartbeat());

  pollfd p{listener, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 10000), 1) << "the client never connected";
  const int fd = accept(listener, nullptr, nullptr);
  ASSERT_GE(fd, 0);
  char greeting[64] = {'\xff', 0, 0, 0, 0, 0, 0, 0, 0, '\x7f', 3, 0, 'P', 'L', 'A', 'I', 'N'};
  greeting[32] = 1;  // as-server
  ASSERT_EQ(write(fd, greeting, sizeof(greeting)), 64);
  char theirs[64];
  ASSERT_TRUE(ReadFully(fd, theirs, sizeof(theirs))) << "no ZMTP greeting from the client";
  char head[2];  // a short command: flags 0x04, then its size
  ASSERT_TRUE(ReadFully(fd, head, 2));
  ASSERT_EQ(head[0], '\x04') << "expected a command frame";
  std::string hello(static_cast<unsigned char>(head[1]), '\0');
  ASSERT_TRUE(ReadFully(fd, hello.data(), hello.size()));
  close(fd);
  close(listener);
  ASSERT_EQ(hello.substr(0, 6), "\x05HELLO") << "expected PLAIN's HELLO";
  const size_t name_size = static_cast<unsigned char>(hello[6]);
  const std::string name = hello.substr(7, name_size);
  const std::string password =
      hello.substr(8 + name_size, static_cast<unsigned char>(hello[7 + name_size]));

  EXPECT_EQ(name, "worker-1");
  EXPECT_NE(password, worker.own.secret_key) << "the client sent its secret key as a password";
  EXPECT_EQ(password.find(worker.own.secret_key.substr(0, 8)), std::string::npos);
  // What was collected proves worker 1 to ps 0 only: ps 0's own key makes it anyway.
  EXPECT_EQ(password, SameHostProof(ps.own.secret_key, worker.own.public_key, "worker-1").value());
}

}  // namespace
}  // namespace wire
}  // namespace pstrain
