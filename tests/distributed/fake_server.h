// A parameter server faked for a client's tests: a ServerSocket on a thread of its own that
// answers each request as the test says, over real sockets and the real wire encoding. What a
// real server does with the requests is tests/ps/'s business.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/wire/transport.h"
#include "tests/distributed/sgd_variables.h"
#include "worker/distributed/ps_client.h"

namespace pstrain {
namespace testing {

class FakeServer {
 public:
  // Answers each request with what `handle` returns (nothing: no answer at all).
  using Handler = std::function<std::optional<wire::Message>(const wire::Message&)>;
  explicit FakeServer(Handler handle) : handle_(std::move(handle)) {
    auto s = wire::ServerSocket::Bind("tcp://127.0.0.1:0");
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    socket_ = std::move(s).value();
    const std::string endpoint = socket_->endpoint();
    host_ = endpoint.substr(endpoint.find("//") + 2);
    thread_ = std::thread([this] { Run(); });
  }
  ~FakeServer() {
    stop_ = true;
    thread_.join();
  }
  const std::string& host() const { return host_; }
  // Every request but heartbeats, in arrival order.
  std::vector<wire::Message> Received() {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }
  // The requests of `types` only, in arrival order.
  std::vector<wire::Message> Received(std::initializer_list<wire::MessageType> types) {
    std::vector<wire::Message> out;
    for (const wire::Message& m : Received()) {
      if (std::find(types.begin(), types.end(), m.type) != types.end()) out.push_back(m);
    }
    return out;
  }
  // As Received(types), once at least `n` of them arrived (or 10 s passed): a client's sends
  // may still be on their way when its first reply came back.
  std::vector<wire::Message> ReceivedAtLeast(std::initializer_list<wire::MessageType> types,
                                             size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    std::vector<wire::Message> out = Received(types);
    while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      out = Received(types);
    }
    return out;
  }

 private:
  void Run() {
    while (!stop_) {
      Result<wire::Incoming> in = socket_->Receive(std::chrono::milliseconds(20));
      if (!in.ok() || !in->message.ok()) continue;
      const wire::Message& m = in->message.value();
      if (m.type != wire::MessageType::kHeartbeat) {
        std::lock_guard<std::mutex> lock(mu_);
        received_.push_back(m);
      }
      std::optional<wire::Message> reply = handle_(m);
      if (reply) (void)socket_->Reply(in->peer, *reply);
    }
  }
  Handler handle_;
  std::unique_ptr<wire::ServerSocket> socket_;
  std::string host_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<wire::Message> received_;
  std::thread thread_;
};

// An ok reply to `request` at map epoch `epoch` and global step `step`; a register's says the
// server holds its variables.
inline wire::Message Ok(const wire::Message& request, uint64_t epoch, int64_t step = 0) {
  wire::Message r;
  r.type = wire::MessageType::kOk;
  r.request_id = request.request_id;
  r.incarnation = 7;
  r.map_epoch = epoch;
  r.step = step;
  if (request.type == wire::MessageType::kRegister) r.value = 1;  // holds its variables
  return r;
}

// A PsClient of `role` (task 0 as the chief, else 1) holding `vars`, connected to `servers`
// with `replicas`; it gives up on a server that stays silent for 20 s.
inline std::unique_ptr<worker::PsClient> ConnectTo(const std::vector<FakeServer*>& servers,
                                                   SgdVariables* vars, int replicas = 0,
                                                   const std::string& role = "worker") {
  std::vector<std::string> hosts;
  for (FakeServer* s : servers) hosts.push_back(s->host());
  auto c = worker::PsClient::Connect(hosts, role, role == "chief" ? 0 : 1, vars->all(), 8 << 20, {},
                                     replicas);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return nullptr;
  c.value()->set_unavailable_timeout(std::chrono::seconds(20));
  return std::move(c).value();
}

}  // namespace testing
}  // namespace pstrain
