// wire::Poll over real loopback sockets: one wait covers a server socket and several
// connections, and names which of them has something to receive.
#include "common/wire/poller.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>

namespace pstrain {
namespace wire {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kWait(10000);

std::unique_ptr<ServerSocket> BindOrDie() {
  Result<std::unique_ptr<ServerSocket>> server = ServerSocket::Bind("tcp://127.0.0.1:0");
  CHECK(server.ok()) << server.status().ToString();
  return std::move(server).value();
}

std::unique_ptr<Connection> ConnectOrDie(const std::string& endpoint) {
  Result<std::unique_ptr<Connection>> conn = Connection::Connect(endpoint);
  CHECK(conn.ok()) << conn.status().ToString();
  return std::move(conn).value();
}

Message Ping(uint64_t id) {
  Message m;
  m.type = MessageType::kHeartbeat;
  m.request_id = id;
  m.role = "worker";
  m.task_index = 0;
  return m;
}

// Answers the next request on `server` with an ok carrying its id.
void Answer(ServerSocket* server) {
  Result<Incoming> in = server->Receive(kWait);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  ASSERT_TRUE(in->message.ok());
  Message reply;
  reply.request_id = in->message->request_id;
  ASSERT_TRUE(server->Reply(in->peer, reply).ok());
}

TEST(PollerTest, NothingToReceiveWaitsOutTheTimeoutAndReportsNothing) {
  auto server = BindOrDie();
  auto conn = ConnectOrDie(server->endpoint());
  // The connection's handshake events come first; Receive reads them (and times out).
  for (int i = 0; i < 100; ++i) {
    Result<PollResult> r = Poll(server.get(), {conn.get()}, milliseconds(50));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (!r->any()) break;
    if (r->server) {
      EXPECT_FALSE(server->Receive(milliseconds(0)).ok());
    }
    if (!r->connections.empty()) {
      EXPECT_FALSE(conn->Receive(milliseconds(0)).ok());
    }
  }
  const auto start = std::chrono::steady_clock::now();
  Result<PollResult> r = Poll(server.get(), {conn.get()}, milliseconds(100));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->any());
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(90));
}

// A wait of one millisecond waits: its remainder, a little under a millisecond once Poll reads
// the clock, is not rounded down to a poll that returns at once. (It was: a serving loop whose
// next look at its connections was under a millisecond away spun until then, and took a fifth
// of a server's small-request rate.)
TEST(PollerTest, AWaitOfOneMillisecondIsNotRoundedDownToNone) {
  auto server = BindOrDie();
  for (int i = 0; i < 20; ++i) {
    const auto start = std::chrono::steady_clock::now();
    Result<PollResult> r = Poll(server.get(), {}, milliseconds(1));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (r->any()) continue;  // the socket's own events
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::microseconds(900));
  }
}

TEST(PollerTest, ARequestOnTheServerSocketWakesThePollAndReceiveTakesItAtOnce) {
  auto server = BindOrDie();
  auto other = BindOrDie();
  auto conn = ConnectOrDie(other->endpoint());
  auto client = ConnectOrDie(server->endpoint());
  ASSERT_TRUE(client->Send(Ping(7)).ok());
  PollResult r;
  // Handshake events may wake the poll first; they are read by Receive, which then times out.
  for (int i = 0; i < 50 && !r.server; ++i) {
    Result<PollResult> polled = Poll(server.get(), {conn.get()}, kWait);
    ASSERT_TRUE(polled.ok()) << polled.status().ToString();
    r = *polled;
    if (r.server) break;
    if (!r.connections.empty()) (void)conn->Receive(milliseconds(0));
  }
  ASSERT_TRUE(r.server);
  Result<Incoming> in = server->Receive(milliseconds(0));
  while (!in.ok() || !in->message.ok()) in = server->Receive(kWait);  // past handshake events
  EXPECT_EQ(in->message->request_id, 7u);
}

TEST(PollerTest, AReplyOnOneOfSeveralConnectionsNamesThatConnection) {
  auto a = BindOrDie();
  auto b = BindOrDie();
  auto to_a = ConnectOrDie(a->endpoint());
  auto to_b = ConnectOrDie(b->endpoint());
  ASSERT_TRUE(to_b->Send(Ping(3)).ok());
  Answer(b.get());
  bool got = false;
  for (int i = 0; i < 50 && !got; ++i) {
    Result<PollResult> r = Poll(nullptr, {to_a.get(), to_b.get()}, kWait);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->any()) << "the reply did not wake the poll";
    for (size_t c : r->connections) {
      Connection* conn = c == 0 ? to_a.get() : to_b.get();
      Result<Message> m = conn->Receive(milliseconds(0));
      if (!m.ok()) continue;  // handshake events only
      EXPECT_EQ(c, 1u) << "a reply on connection 1 was reported on connection " << c;
      EXPECT_EQ(m->request_id, 3u);
      got = true;
    }
  }
  EXPECT_TRUE(got);
}

TEST(PollerTest, TheServerAndAConnectionReadyTogetherAreBothReported) {
  auto server = BindOrDie();
  auto b = BindOrDie();
  auto client = ConnectOrDie(server->endpoint());
  auto to_b = ConnectOrDie(b->endpoint());
  ASSERT_TRUE(to_b->Send(Ping(1)).ok());
  Answer(b.get());
  ASSERT_TRUE(client->Send(Ping(2)).ok());
  // Let both arrive, then drain handshake events until each side's message is what is left.
  std::this_thread::sleep_for(milliseconds(200));
  Result<PollResult> r = Poll(server.get(), {to_b.get()}, kWait);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->server);
  ASSERT_EQ(r->connections.size(), 1u);
  EXPECT_EQ(r->connections[0], 0u);
  Result<Message> reply = to_b->Receive(kWait);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->request_id, 1u);
}

}  // namespace
}  // namespace wire
}  // namespace pstrain
