// RequestRouter (worker/distributed/request_router.h) against fake servers over real sockets:
// exchanges that share the connections. A step's per-layer pulls or pushed parts stay in flight
// while its embedding rows are exchanged, and each exchange must get its own replies, whichever
// of them reads them off the connection.
#include "worker/distributed/request_router.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "tests/distributed/fake_server.h"

namespace pstrain {
namespace {

using std::chrono::milliseconds;
using testing::FakeServer;
using wire::Message;
using wire::MessageType;

constexpr milliseconds kTimeout(10000);

// Answers every request at once with its own request id and, in `value`, its step.
std::optional<Message> Echo(const Message& request) {
  Message r = testing::Ok(request, 0);
  r.value = request.step;
  return r;
}

struct Router {
  // `reinit`: the chief's register of a server that lost its variables (unset: not the chief).
  explicit Router(const std::vector<FakeServer*>& servers,
                  std::function<Message(int)> reinit = nullptr)
      : routes(static_cast<int>(servers.size()), 0, "worker", 1, {}) {
    std::vector<std::unique_ptr<wire::Connection>> connections;
    worker::RequestRouter::Options o;
    o.who = "worker 1";
    o.reinit = std::move(reinit);
    for (FakeServer* s : servers) {
      auto c = wire::Connection::Connect("tcp://" + s->host());
      EXPECT_TRUE(c.ok()) << c.status().ToString();
      connections.push_back(std::move(c).value());
      o.hosts.push_back(s->host());
    }
    router = std::make_unique<worker::RequestRouter>(std::move(connections), nullptr, &routes, o);
  }
  worker::ShardRoutes routes;
  std::unique_ptr<worker::RequestRouter> router;
};

// A push told apart by its step.
Message Numbered(uint64_t n) {
  Message m;
  m.type = MessageType::kPush;
  m.sequence = n;
  m.role = "worker";
  m.task_index = 1;
  m.incarnation = 3;
  m.step = static_cast<int64_t>(n);
  return m;
}

TEST(RequestRouterTest, AnExchangeThatReadsAnotherExchangesRepliesKeepsThemForIt) {
  FakeServer a(Echo), b(Echo);
  Router r({&a, &b});
  // The first exchange: 50 requests to each server, sent and left in flight.
  std::shared_ptr<worker::RequestRouter::InFlight> first = r.router->Start();
  for (uint64_t k = 1; k <= 50; ++k) {
    for (auto [server, sequence] : {std::pair<int, uint64_t>{0, k}, {1, 100 + k}}) {
      const Status sent = r.router->Send(first.get(), server, Numbered(sequence));
      ASSERT_TRUE(sent.ok()) << sent.ToString();
    }
  }
  std::this_thread::sleep_for(milliseconds(200));  // their replies are here, unread
  // A second exchange on the same connections reads past them to its own.
  Result<std::vector<Message>> second =
      r.router->Exchange({{0, Numbered(1000)}, {1, Numbered(2000)}}, kTimeout);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ((*second)[0].value, 1000);
  EXPECT_EQ((*second)[1].value, 2000);
  // The first gets every one of its replies, each its own request's.
  Result<std::vector<Message>> replies = r.router->Await(first.get(), kTimeout);
  ASSERT_TRUE(replies.ok()) << replies.status().ToString();
  ASSERT_EQ(replies->size(), 100u);
  for (uint64_t k = 1; k <= 50; ++k) {
    EXPECT_EQ((*replies)[2 * (k - 1)].value, static_cast<int64_t>(k));
    EXPECT_EQ((*replies)[2 * (k - 1) + 1].value, static_cast<int64_t>(100 + k));
  }
}

// The chief's step: a layer's pull awaited while later requests are still to be sent. The server
// has restarted, so the first answer is "no variables": the chief gives them again, a register
// the router adds to the exchange between the caller's requests. The requests sent after it keep
// their places: each reply goes to its own request, by the caller's count, not the register.
TEST(RequestRouterTest, AReinitInTheMiddleOfAnExchangeLeavesEveryReplyWithItsRequest) {
  std::atomic<bool> restarted{true};
  FakeServer a([&](const Message& request) -> std::optional<Message> {
    if (request.type == MessageType::kRegister) {
      restarted = false;
      return testing::Ok(request, 0);
    }
    if (restarted) {
      return wire::ErrorReply(request, Status(StatusCode::kUninitialized, "no variables"));
    }
    return Echo(request);
  });
  Router r({&a}, [](int) {
    Message values;
    values.type = MessageType::kRegister;
    values.role = "worker";
    values.task_index = 0;
    values.incarnation = 3;
    values.step = 77;
    return values;
  });
  std::shared_ptr<worker::RequestRouter::InFlight> f = r.router->Start();
  std::vector<std::pair<size_t, int64_t>> seen;
  const auto take = [&](size_t i, const Message& reply) { seen.push_back({i, reply.value}); };
  ASSERT_TRUE(r.router->Send(f.get(), 0, Numbered(1)).ok());
  Status waited = r.router->AwaitSome(f.get(), kTimeout, {0}, take);
  ASSERT_TRUE(waited.ok()) << waited.ToString();
  EXPECT_FALSE(restarted) << "the chief's register never reached the server";
  ASSERT_TRUE(r.router->Send(f.get(), 0, Numbered(2)).ok());
  ASSERT_TRUE(r.router->Send(f.get(), 0, Numbered(3)).ok());
  waited = r.router->AwaitSome(f.get(), kTimeout, {1}, take);
  ASSERT_TRUE(waited.ok()) << waited.ToString();
  Result<std::vector<Message>> replies = r.router->Await(f.get(), kTimeout, take);
  ASSERT_TRUE(replies.ok()) << replies.status().ToString();
  ASSERT_EQ(replies->size(), 3u);
  for (int64_t k = 1; k <= 3; ++k) EXPECT_EQ((*replies)[k - 1].value, k) << "reply " << k;
  std::sort(seen.begin(), seen.end());
  const std::vector<std::pair<size_t, int64_t>> each = {{0, 1}, {1, 2}, {2, 3}};
  EXPECT_EQ(seen, each) << "on_reply saw another request's reply, or missed one";
}

}  // namespace
}  // namespace pstrain
