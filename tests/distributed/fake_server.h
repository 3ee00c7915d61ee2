// A parameter server's socket on a thread, answering as a test says, for tests of the worker's
// client side (PsClient, RequestRouter) without a real server: what a real server does with the
// requests is tests/ps/'s business.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/wire/transport.h"

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

}  // namespace testing
}  // namespace pstrain
