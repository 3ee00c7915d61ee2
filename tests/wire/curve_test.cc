// CurveZMQ over real sockets on loopback: an authorised client pulls and pushes; a client with
// no keys, with a key the server does not know, or trusting another server key is refused with
// an error saying so, in bounded time, and the server logs each attempt and goes on serving.
#include "common/wire/curve.h"

#include <glog/logging.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "common/wire/transport.h"

namespace pstrain {
namespace wire {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
constexpr milliseconds kWait(10000);

// Everything logged while it lives (glog calls sinks from any thread).
class CapturedLog : public google::LogSink {
 public:
  CapturedLog() { google::AddLogSink(this); }
  ~CapturedLog() override { google::RemoveLogSink(this); }
  void send(google::LogSeverity severity, const char*, const char*, int,
            const google::LogMessageTime&, const char* message, size_t length) override {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.push_back(std::string(google::GetLogSeverityName(severity)) + ": " +
                     std::string(message, length));
  }
  // The first line holding every one of `parts`, waiting up to 5 s for it; "" if none came.
  std::string Find(const std::vector<std::string>& parts) {
    for (const auto deadline = Clock::now() + milliseconds(5000); Clock::now() < deadline;) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (const std::string& line : lines_) {
          bool all = true;
          for (const std::string& p : parts) all = all && line.find(p) != std::string::npos;
          if (all) return line;
        }
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    return "";
  }
  std::string All() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string all;
    for (const std::string& line : lines_) all += line + "\n";
    return all;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

CurveKeyPair NewKeys() {
  Result<CurveKeyPair> keys = NewCurveKeyPair();
  CHECK(keys.ok()) << keys.status().ToString();
  return keys.value();
}

// A one-variable parameter server on its own thread: a pull returns "w", a push subtracts the
// pushed tensor from it.
class VariableServer {
 public:
  explicit VariableServer(const Security& security) {
    Result<std::unique_ptr<ServerSocket>> bound =
        ServerSocket::Bind("tcp://127.0.0.1:0", {}, security);
    CHECK(bound.ok()) << bound.status().ToString();
    socket_ = std::move(bound).value();
    thread_ = std::thread([this] { Serve(); });
  }
  ~VariableServer() {
    stop_ = true;
    thread_.join();
  }
  std::string endpoint() const { return socket_->endpoint(); }
  int64_t refused() const { return socket_->refused_handshakes(); }
  float value() {
    std::lock_guard<std::mutex> lock(mu_);
    return value_;
  }

 private:
  void Serve() {
    while (!stop_) {
      Result<Incoming> in = socket_->Receive(milliseconds(50));
      if (!in.ok() || !in->message.ok()) continue;
      const Message& request = in->message.value();
      Message reply;
      reply.request_id = request.request_id;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (request.type == MessageType::kPush) value_ -= request.tensors.at(0).tensor[0];
        reply.tensors = {{"w", Tensor::Filled({1}, value_)}};
      }
      EXPECT_TRUE(socket_->Reply(in->peer, reply).ok());
    }
  }
  std::unique_ptr<ServerSocket> socket_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  float value_ = 10.0f;
};

Message Pull() {
  Message m;
  m.type = MessageType::kPull;
  m.names = {"w"};
  return m;
}

Message Push(float g) {
  Message m;
  m.type = MessageType::kPush;
  m.tensors = {{"w", Tensor::Filled({1}, g)}};
  return m;
}

std::unique_ptr<Connection> ConnectOrDie(const std::string& endpoint, const Security& security) {
  Result<std::unique_ptr<Connection>> conn = Connection::Connect(endpoint, {}, security);
  CHECK(conn.ok()) << conn.status().ToString();
  return std::move(conn).value();
}

class CurveTransportTest : public ::testing::Test {
 protected:
  CurveTransportTest() : server_keys_(NewKeys()), worker_keys_(NewKeys()) {
    Security s;
    s.own = server_keys_;
    s.client_keys = {{worker_keys_.public_key, "worker-0"}};
    server_ = std::make_unique<VariableServer>(s);
  }
  Security Client(const CurveKeyPair& own, const std::string& server_key) const {
    Security s;
    s.own = own;
    s.server_key = server_key;
    return s;
  }
  // The authorised worker pulls and pushes; the variable shows every push applied once.
  void ExpectAuthorisedClientWorks(float expected_before) {
    auto conn = ConnectOrDie(server_->endpoint(), Client(worker_keys_, server_keys_.public_key));
    Result<Message> pulled = conn->Call(Pull(), kWait);
    ASSERT_TRUE(pulled.ok()) << pulled.status().ToString();
    EXPECT_EQ(pulled->tensors.at(0).tensor[0], expected_before);
    Result<Message> pushed = conn->Call(Push(1.5f), kWait);
    ASSERT_TRUE(pushed.ok()) << pushed.status().ToString();
    EXPECT_EQ(pushed->tensors.at(0).tensor[0], expected_before - 1.5f);
  }
  // A refused client's pull and push both fail within `within`; returns the pull's error.
  Status ExpectRefused(const Security& security, milliseconds timeout, milliseconds within) {
    auto conn = ConnectOrDie(server_->endpoint(), security);
    const auto start = Clock::now();
    Result<Message> pulled = conn->Call(Pull(), timeout);
    EXPECT_FALSE(pulled.ok());
    EXPECT_FALSE(conn->Call(Push(100.0f), timeout).ok());
    EXPECT_LT(Clock::now() - start, within);
    return pulled.ok() ? Status::OK() : pulled.status();
  }

  CapturedLog log_;
  CurveKeyPair server_keys_, worker_keys_;
  std::unique_ptr<VariableServer> server_;
};

TEST_F(CurveTransportTest, AuthorisedClientPullsAndPushesOverCurve) {
  ExpectAuthorisedClientWorks(10.0f);
  EXPECT_EQ(server_->value(), 8.5f);
  EXPECT_EQ(server_->refused(), 0) << log_.All();
}

TEST_F(CurveTransportTest, ClientWithoutKeysIsRefusedSayingSoAndTheServerLogsIt) {
  Status error = ExpectRefused(Security{}, kWait, milliseconds(5000));
  EXPECT_EQ(error.code(), StatusCode::kFailedPrecondition) << error.ToString();
  EXPECT_NE(error.message().find("authentication refused by " + server_->endpoint()),
            std::string::npos)
      << error.message();
  EXPECT_NE(error.message().find("requires CURVE"), std::string::npos) << error.message();
  // Both ends find the mismatch; the one that finds it first hangs up on the other, so the
  // server logs either what it found or the hang-up.
  EXPECT_NE(
      log_.Find({"WARNING", "handshake failed on " + server_->endpoint(), "plaintext against"}), "")
      << log_.All();
  EXPECT_GE(server_->refused(), 1);
  EXPECT_EQ(server_->value(), 10.0f) << "a refused push changed the variable";
  ExpectAuthorisedClientWorks(10.0f);
}

TEST_F(CurveTransportTest, ClientWithAnUnknownKeyIsRefusedAndItsAddressAndKeyAreLogged) {
  const CurveKeyPair stray = NewKeys();
  Status error = ExpectRefused(Client(stray, server_keys_.public_key), kWait, milliseconds(5000));
  EXPECT_EQ(error.code(), StatusCode::kFailedPrecondition) << error.ToString();
  EXPECT_NE(error.message().find("authentication refused by " + server_->endpoint()),
            std::string::npos)
      << error.message();
  EXPECT_NE(error.message().find("ZAP status 400"), std::string::npos) << error.message();
  EXPECT_NE(log_.Find({"WARNING", "authentication refused", "from 127.0.0.1", server_->endpoint(),
                       "unknown CURVE public key " + stray.public_key}),
            "")
      << log_.All();
  EXPECT_GE(server_->refused(), 1);
  EXPECT_EQ(server_->value(), 10.0f) << "a refused push changed the variable";
  ExpectAuthorisedClientWorks(10.0f);
}

TEST_F(CurveTransportTest, ClientTrustingAnotherServerKeyStopsSayingWhy) {
  // The server cannot even read this client's hello, so it just hangs up: no reason reaches the
  // client. A short call times out saying what that usually means; after ten hang-ups in a row
  // (ZeroMQ retries every 100 ms) the client stops.
  auto conn = ConnectOrDie(server_->endpoint(), Client(worker_keys_, NewKeys().public_key));
  Result<Message> first = conn->Call(Pull(), milliseconds(350));
  ASSERT_FALSE(first.ok());
  if (first.status().code() == StatusCode::kUnavailable) {
    EXPECT_NE(first.status().message().find("timeout after 350 ms"), std::string::npos)
        << first.status().message();
    EXPECT_NE(first.status().message().find("trusts another public key than the server's own"),
              std::string::npos)
        << first.status().message();
  }
  Status error = ExpectRefused(Client(worker_keys_, NewKeys().public_key), milliseconds(10000),
                               milliseconds(5000));
  EXPECT_EQ(error.code(), StatusCode::kFailedPrecondition) << error.ToString();
  EXPECT_NE(error.message().find("authentication refused by " + server_->endpoint() +
                                 ": the server hung up on 10 handshake(s) in a row"),
            std::string::npos)
      << error.message();
  EXPECT_NE(error.message().find("trusts another public key than the server's own"),
            std::string::npos)
      << error.message();
  EXPECT_NE(log_.Find({"WARNING", "handshake failed on " + server_->endpoint(),
                       "could not decrypt the client's CURVE hello"}),
            "")
      << log_.All();
  EXPECT_EQ(server_->value(), 10.0f);
  ExpectAuthorisedClientWorks(10.0f);
}

TEST_F(CurveTransportTest, RepeatedRefusalsOfOneStrayClientAreLoggedOnceAWhile) {
  // ZeroMQ retries a connection the server hung up on every 100 ms by itself (here: a client
  // trusting another server key); the log gets one line for all of them.
  auto conn = ConnectOrDie(server_->endpoint(), Client(worker_keys_, NewKeys().public_key));
  for (int i = 0; i < 100 && server_->refused() < 5; ++i) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_GE(server_->refused(), 5) << "the stray client did not retry";
  const std::string all = log_.All();
  size_t lines = 0;
  for (size_t at = all.find("could not decrypt"); at != std::string::npos;
       at = all.find("could not decrypt", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 1u) << all;
}

TEST(CurvePlaintextServerTest, CurveClientAgainstAPlaintextServerIsRefusedByBothSides) {
  CapturedLog log;
  VariableServer server{Security{}};
  Security curve;
  curve.own = NewKeys();
  curve.server_key = NewKeys().public_key;
  auto conn = ConnectOrDie(server.endpoint(), curve);
  Result<Message> pulled = conn->Call(Pull(), kWait);
  ASSERT_FALSE(pulled.ok());
  EXPECT_EQ(pulled.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(pulled.status().message().find("the server is plaintext"), std::string::npos)
      << pulled.status().message();
  EXPECT_NE(log.Find({"WARNING", "handshake failed on " + server.endpoint(), "CURVE against",
                      "plaintext"}),
            "")
      << log.All();
  // And plaintext still works with plaintext.
  Result<Message> plain = ConnectOrDie(server.endpoint(), Security{})->Call(Pull(), kWait);
  EXPECT_TRUE(plain.ok()) << plain.status().ToString();
}

TEST(CurveZapDomainTest, EachServerInOneProcessLetsInOnlyItsOwnClients) {
  // One ZAP handler serves every socket of the process: each answers from its own allow-list.
  const CurveKeyPair a_keys = NewKeys(), b_keys = NewKeys(), a_client = NewKeys(),
                     b_client = NewKeys();
  Security a, b;
  a.own = a_keys;
  a.client_keys = {{a_client.public_key, "a-client"}};
  b.own = b_keys;
  b.client_keys = {{b_client.public_key, "b-client"}};
  VariableServer server_a(a), server_b(b);
  const auto call = [](const std::string& endpoint, const CurveKeyPair& own,
                       const std::string& server_key) {
    Security s;
    s.own = own;
    s.server_key = server_key;
    return ConnectOrDie(endpoint, s)->Call(Pull(), kWait).status();
  };
  EXPECT_TRUE(call(server_a.endpoint(), a_client, a_keys.public_key).ok());
  EXPECT_TRUE(call(server_b.endpoint(), b_client, b_keys.public_key).ok());
  Status crossed = call(server_b.endpoint(), a_client, b_keys.public_key);
  EXPECT_EQ(crossed.code(), StatusCode::kFailedPrecondition) << crossed.ToString();
  EXPECT_EQ(server_b.refused(), 1);
  EXPECT_EQ(server_a.refused(), 0);
}

TEST(CurveOptionsTest, IncompleteSecurityIsRefusedAtBindAndConnect) {
  Security server;
  server.own = NewKeys();  // no client keys: nobody could get in
  Result<std::unique_ptr<ServerSocket>> bound = ServerSocket::Bind("tcp://127.0.0.1:0", {}, server);
  ASSERT_FALSE(bound.ok());
  EXPECT_NE(bound.status().message().find("needs its clients' public keys"), std::string::npos);
  Security client;
  client.own = NewKeys();  // no server key
  Result<std::unique_ptr<Connection>> conn = Connection::Connect("tcp://127.0.0.1:1", {}, client);
  ASSERT_FALSE(conn.ok());
  EXPECT_NE(conn.status().message().find("needs the server's public key"), std::string::npos);
  client.server_key = "not a key";
  conn = Connection::Connect("tcp://127.0.0.1:1", {}, client);
  ASSERT_FALSE(conn.ok());
  EXPECT_NE(conn.status().message().find("is not a CURVE key"), std::string::npos);
}

}  // namespace
}  // namespace wire
}  // namespace pstrain
