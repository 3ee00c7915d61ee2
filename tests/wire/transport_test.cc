// The transport over real sockets on loopback TCP: round trips, zero-copy on both sides,
// timeouts and stale replies, and malformed frames sent raw by a plain DEALER socket.
#include "common/wire/transport.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <thread>

#include "common/wire/zmq_context.h"
#include "tests/wire/wire_test_util.h"

namespace pstrain {
namespace wire {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kWait(10000);

std::unique_ptr<ServerSocket> BindOrDie(const MessageLimits& limits = {}) {
  Result<std::unique_ptr<ServerSocket>> server = ServerSocket::Bind("tcp://127.0.0.1:0", limits);
  CHECK(server.ok()) << server.status().ToString();
  return std::move(server).value();
}

std::unique_ptr<Connection> ConnectOrDie(const std::string& endpoint) {
  Result<std::unique_ptr<Connection>> conn = Connection::Connect(endpoint);
  CHECK(conn.ok()) << conn.status().ToString();
  return std::move(conn).value();
}

int PortOf(const std::string& endpoint) {
  return std::atoi(endpoint.substr(endpoint.rfind(':') + 1).c_str());
}

// True once nothing accepts TCP connections on 127.0.0.1:port.
bool PortClosed(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool refused = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0;
  close(fd);
  return refused;
}

Message Received(ServerSocket& server, std::string* peer = nullptr) {
  Result<Incoming> in = server.Receive(kWait);
  CHECK(in.ok()) << in.status().ToString();
  CHECK(in->message.ok()) << in->message.status().ToString();
  if (peer != nullptr) *peer = in->peer;
  return std::move(in->message).value();
}

TEST(TransportTest, BindToPortZeroReportsTheRealPort) {
  auto server = BindOrDie();
  EXPECT_EQ(server->endpoint().rfind("tcp://127.0.0.1:", 0), 0u) << server->endpoint();
  EXPECT_GT(PortOf(server->endpoint()), 0);
  EXPECT_EQ(TcpEndpoint("10.0.0.1:2222"), "tcp://10.0.0.1:2222");
  EXPECT_EQ(TcpEndpoint("tcp://h:1"), "tcp://h:1");
}

// ctest runs each test in a process of its own: here the context is made after the call.
TEST(TransportTest, IoThreadsAreSetBeforeTheFirstSocketAndOnlyThen) {
  EXPECT_EQ(SetIoThreads(0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SetIoThreads(17).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(SetIoThreads(4).ok());
  auto server = BindOrDie();  // the first socket: the context starts with 4
  EXPECT_EQ(zmq_ctx_get(ZmqContext(), ZMQ_IO_THREADS), 4);
  const Status late = SetIoThreads(2);
  EXPECT_EQ(late.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(late.message().find("4 already run"), std::string::npos) << late.message();
  EXPECT_EQ(zmq_ctx_get(ZmqContext(), ZMQ_IO_THREADS), 4);
}

// Each request type goes to the server with every field its struct holds, and comes back
// answered by an ok or an error reply with every field theirs hold.
TEST(TransportTest, EveryMessageTypeRoundTripsBothWays) {
  auto server = BindOrDie();
  auto conn = ConnectOrDie(server->endpoint());
  int replies = 0;
  for (MessageType type : AllMessageTypes()) {
    if (type == MessageType::kOk || type == MessageType::kError) continue;  // the replies below
    Message m = ExampleOf(type);
    m.request_id = 100 + static_cast<int>(type);
    ASSERT_TRUE(conn->Send(m).ok()) << MessageTypeName(type);
    std::string peer;
    Message got = Received(*server, &peer);
    ExpectSameMessage(m, got);

    Message reply = ExampleOf(++replies % 2 ? MessageType::kOk : MessageType::kError);
    reply.request_id = m.request_id;
    ASSERT_TRUE(server->Reply(peer, reply).ok());
    Result<Message> back = conn->Receive(kWait);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ExpectSameMessage(reply, *back);
  }
}

TEST(TransportTest, AReplySentToAServerIsRefusedAndAnsweredByItsId) {
  auto server = BindOrDie();
  auto conn = ConnectOrDie(server->endpoint());
  Message ok = ExampleOf(MessageType::kOk);
  ok.request_id = 5;
  ASSERT_TRUE(conn->Send(ok).ok());
  Result<Incoming> in = server->Receive(kWait);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  ASSERT_FALSE(in->message.ok());
  EXPECT_NE(in->message.status().message().find("ok is a reply, not a request"), std::string::npos)
      << in->message.status().message();
  EXPECT_EQ(in->request_id, 5u);
}

TEST(TransportTest, SeveralTensorsKeepOrderNamesShapesAndBits) {
  auto server = BindOrDie();
  auto conn = ConnectOrDie(server->endpoint());
  Message m;
  m.type = MessageType::kPush;
  m.tensors = {{"conv1/w", RandomBitsTensor({16, 3, 5, 5}, 1)},
               {"conv1/b", RandomBitsTensor({16}, 2)},
               {"fc/w", RandomBitsTensor({256, 1024}, 3)},
               {"scalar", RandomBitsTensor({}, 4)},
               {"empty", Tensor(Shape{0, 3})},
               {"fc/b", RandomBitsTensor({1024}, 5)}};
  ASSERT_TRUE(conn->Send(m).ok());
  Message got = Received(*server);
  ASSERT_EQ(got.tensors.size(), m.tensors.size());
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    EXPECT_EQ(got.tensors[i].name, m.tensors[i].name);
    EXPECT_EQ(got.tensors[i].tensor.shape(), m.tensors[i].tensor.shape()) << i;
    EXPECT_TRUE(BitwiseEqual(got.tensors[i].tensor, m.tensors[i].tensor)) << i;
  }
}

TEST(TransportTest, SixtyFourMiBTensorRoundTrips) {
  auto server = BindOrDie();
  auto conn = ConnectOrDie(server->endpoint());
  const Tensor big = RandomBitsTensor({16, 1024, 1024}, 64);
  std::thread echo([&] {
    std::string peer;
    Message got = Received(*server, &peer);
    got.type = MessageType::kOk;
    EXPECT_TRUE(server->Reply(peer, got).ok());
  });
  Message push;
  push.type = MessageType::kPush;
  push.tensors = {{"big", big}};
  Result<Message> reply = conn->Call(push, kWait);
  echo.join();
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  ASSERT_EQ(reply->tensors.size(), 1u);
  EXPECT_TRUE(BitwiseEqual(reply->tensors[0].tensor, big));
}

// Zero-copy send: ZeroMQ holds the tensor's own buffer (not a copy) until it has written it. A
// connection whose server is not up yet queues the message, so the buffer cannot be released
// before the server exists, and is released once the message has gone.
TEST(TransportTest, SentTensorBufferIsHeldUntilZeroMqHasSentIt) {
  std::string endpoint = BindOrDie()->endpoint();  // a free port, closed again
  const int port = PortOf(endpoint);
  for (int i = 0; i < 200 && !PortClosed(port); ++i) std::this_thread::sleep_for(milliseconds(10));
  auto conn = ConnectOrDie(endpoint);

  const int64_t n = 1 << 20;
  auto released = std::make_shared<std::atomic<bool>>(false);
  float* buffer = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  for (int64_t i = 0; i < n; ++i) buffer[i] = static_cast<float>(i);
  Message m;
  m.type = MessageType::kPush;
  m.tensors = {{"w", Tensor::Wrap({n}, buffer, [buffer, released] {
                  std::free(buffer);
                  *released = true;
                })}};
  ASSERT_TRUE(conn->Send(m).ok());
  m.tensors.clear();  // ZeroMQ's hold is now the only one
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_FALSE(*released) << "the buffer was released while the message was still queued";

  std::unique_ptr<ServerSocket> server;
  for (int i = 0; i < 200 && server == nullptr; ++i) {
    Result<std::unique_ptr<ServerSocket>> bound = ServerSocket::Bind(endpoint);
    if (bound.ok())
      server = std::move(bound).value();
    else
      std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_NE(server, nullptr) << "could not bind " << endpoint << " again";
  Message got = Received(*server);
  ASSERT_EQ(got.tensors.size(), 1u);
  const Tensor& w = got.tensors[0].tensor;
  for (int64_t i = 0; i < n; i += 4099) ASSERT_EQ(w[i], static_cast<float>(i));
  for (int i = 0; i < 500 && !*released; ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_TRUE(*released) << "the buffer was never released after the message was sent";
}

// Zero-copy receive: a large received tensor is the ZeroMQ frame itself, held until the last
// copy of the tensor goes; a small one is copied and frees its frame at once.
TEST(TransportTest, ReceivedTensorIsTheFrameItselfUntilDestroyed) {
  auto server = BindOrDie();
  auto conn = ConnectOrDie(server->endpoint());
  const int64_t before = ReceivedFramesHeld();
  Message m;
  m.type = MessageType::kPush;
  m.tensors = {{"a", RandomBitsTensor({1 << 18}, 1)},
               {"b", RandomBitsTensor({1 << 18}, 2)},
               {"small", RandomBitsTensor({8}, 3)}};
  ASSERT_TRUE(conn->Send(m).ok());
  Message got = Received(*server);
  EXPECT_EQ(ReceivedFramesHeld() - before, 2) << "expected the two large frames to be held";

  Tensor a = got.tensors[0].tensor;
  const float* data = a.data();
  got = Message();
  EXPECT_EQ(ReceivedFramesHeld() - before, 1);
  EXPECT_EQ(a.data(), data);
  EXPECT_TRUE(BitwiseEqual(a, m.tensors[0].tensor));
  a = Tensor();
  EXPECT_EQ(ReceivedFramesHeld() - before, 0);
}

TEST(TransportTest, CallTimeoutNamesTheEndpoint) {
  auto server = BindOrDie();  // receives but never replies
  auto conn = ConnectOrDie(server->endpoint());
  Message ping;
  ping.type = MessageType::kHeartbeat;
  Result<Message> reply = conn->Call(ping, milliseconds(100));
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(reply.status().message().find("timeout after 100 ms"), std::string::npos)
      << reply.status().message();
  EXPECT_NE(reply.status().message().find(server->endpoint()), std::string::npos)
      << reply.status().message();
}

TEST(TransportTest, CallDiscardsAStaleReplyToAnEarlierTimedOutCall) {
  auto server = BindOrDie();
  auto conn = ConnectOrDie(server->endpoint());
  std::thread slow_server([&] {
    std::string peer1, peer2;
    Message first = Received(*server, &peer1);
    Message second = Received(*server, &peer2);
    // The reply to the first call comes after the client gave up on it.
    for (auto [request, peer] : {std::pair{&first, &peer1}, std::pair{&second, &peer2}}) {
      Message reply;
      reply.request_id = request->request_id;
      reply.value = request->value;
      EXPECT_TRUE(server->Reply(*peer, reply).ok());
    }
  });
  Message request;
  request.type = MessageType::kBarrier;  // its participants tell the two calls apart
  request.value = 1;
  EXPECT_FALSE(conn->Call(request, milliseconds(50)).ok());
  request.value = 2;
  Result<Message> reply = conn->Call(request, kWait);
  slow_server.join();
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->value, 2);
}

TEST(TransportTest, ErrorReplyBecomesAStatusNamingTheServersMessage) {
  auto server = BindOrDie();
  auto conn = ConnectOrDie(server->endpoint());
  std::thread refusing_server([&] {
    std::string peer;
    Message request = Received(*server, &peer);
    EXPECT_TRUE(server->Reply(peer, ErrorReply(request, NotFound("no variable 'fc/w'"))).ok());
  });
  Message pull;
  pull.type = MessageType::kPull;
  pull.names = {"fc/w"};
  Result<Message> reply = conn->Call(pull, kWait);
  refusing_server.join();
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), StatusCode::kNotFound);
  EXPECT_NE(reply.status().message().find("no variable 'fc/w'"), std::string::npos);
  EXPECT_NE(reply.status().message().find(server->endpoint()), std::string::npos);
}

TEST(TransportTest, ReplyToAPeerThatIsGoneFails) {
  auto server = BindOrDie();
  EXPECT_FALSE(server->Reply("no such peer", Message{}).ok());
}

TEST(TransportTest, TrySendToAServerNotThereQueuesThenRefusesWithoutWaitingAndDeliversInOrder) {
  // A Unix socket path in a directory of this test's own: no other test can take it meanwhile,
  // as one could take a TCP port freed by a probe while ctest runs tests in parallel.
  std::string dir = ::testing::TempDir() + "/trysend-XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string endpoint = "ipc://" + dir + "/server.sock";
  auto conn = ConnectOrDie(endpoint);
  Message m;
  m.type = MessageType::kHeartbeat;
  const auto start = std::chrono::steady_clock::now();
  int queued = 0;
  Status full;
  for (int i = 0; i < 1000 && full.ok(); ++i) {
    m.request_id = static_cast<uint64_t>(i + 1);
    full = conn->TrySend(m);
    if (full.ok()) ++queued;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2000));
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted) << full.ToString();
  EXPECT_GT(queued, 0);
  // The server comes: what was queued arrives, in order.
  Result<std::unique_ptr<ServerSocket>> server = ServerSocket::Bind(endpoint);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  for (int i = 0; i < queued; ++i) {
    EXPECT_EQ(Received(**server).request_id, static_cast<uint64_t>(i + 1));
  }
}

}  // namespace
}  // namespace wire
}  // namespace pstrain
