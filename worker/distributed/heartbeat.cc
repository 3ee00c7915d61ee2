#include "worker/distributed/heartbeat.h"

#include <glog/logging.h>

namespace pstrain {
namespace worker {

using Clock = std::chrono::steady_clock;
using wire::Message;
using wire::MessageType;

HeartbeatMonitor::HeartbeatMonitor(std::vector<std::string> servers, std::string role,
                                   int task_index, Connector connect, HeartbeatOptions options)
    : names_(std::move(servers)),
      role_(std::move(role)),
      task_index_(task_index),
      connect_(std::move(connect)),
      options_(options),
      servers_(names_.size()) {}

HeartbeatMonitor::~HeartbeatMonitor() {
  if (!thread_.joinable()) return;
  stop_ = true;
  thread_.join();
  for (Server& s : servers_) {
    if (s.connection) (void)s.connection->Send(Heartbeat("goodbye"));
  }
}

std::string HeartbeatMonitor::Name(int s) const {
  return "ps " + std::to_string(s) + " (" + names_[s] + ")";
}

Message HeartbeatMonitor::Heartbeat(const std::string& text) const {
  Message m;
  m.type = MessageType::kHeartbeat;
  m.role = role_;
  m.task_index = task_index_;
  m.text = text;
  m.incarnation = wire::ProcessIncarnation();
  return m;
}

Status HeartbeatMonitor::Start() {
  const auto now = Clock::now();
  for (size_t s = 0; s < servers_.size(); ++s) {
    ASSIGN_OR_RETURN(servers_[s].connection, connect_(static_cast<int>(s)));
    servers_[s].last_reply = now;
  }
  thread_ = std::thread([this] { Run(); });
  return Status::OK();
}

HeartbeatMonitor::Health HeartbeatMonitor::Of(int server) const {
  std::lock_guard<std::mutex> lock(mu_);
  return servers_[server].health;
}

void HeartbeatMonitor::Run() {
  auto next = Clock::now();
  while (!stop_) {
    const auto now = Clock::now();
    if (now >= next) {
      Tick(now);
      next = now + options_.interval;
    }
    for (size_t s = 0; s < servers_.size(); ++s) Drain(static_cast<int>(s), Clock::now());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void HeartbeatMonitor::Tick(Clock::time_point now) {
  for (size_t i = 0; i < servers_.size(); ++i) {
    const int s = static_cast<int>(i);
    Server& server = servers_[i];
    bool up;
    {
      std::lock_guard<std::mutex> lock(mu_);
      up = server.health.up;
      if (up && now - server.last_reply > options_.timeout) {
        server.health.up = up = false;
        server.health.down_since = now;
        LOG(WARNING) << role_ << " " << task_index_ << ": " << Name(s)
                     << " has not answered heartbeats for "
                     << std::chrono::duration<double>(now - server.last_reply).count()
                     << " s: presumed dead; requests to it are retried until it is back";
      }
    }
    // A dead server's queue only grows: start afresh so that the next process there gets one
    // heartbeat rather than a backlog.
    if (!up) Reconnect(s);
    if (server.connection) {
      Status sent = server.connection->Send(Heartbeat(""));
      if (!sent.ok()) VLOG(1) << "heartbeat to " << Name(s) << ": " << sent.ToString();
    }
  }
}

void HeartbeatMonitor::Reconnect(int s) {
  Result<std::unique_ptr<wire::Connection>> c = connect_(s);
  if (c.ok()) {
    servers_[s].connection = std::move(c).value();
  } else {
    LOG(WARNING) << role_ << " " << task_index_ << ": reconnecting to " << Name(s) << ": "
                 << c.status().ToString();
  }
}

void HeartbeatMonitor::Drain(int s, Clock::time_point now) {
  Server& server = servers_[s];
  if (!server.connection) return;
  while (true) {
    Result<Message> reply = server.connection->Receive(std::chrono::milliseconds(0));
    if (!reply.ok()) return;  // nothing more (or unreadable: the next heartbeat will tell)
    server.last_reply = now;
    if (reply->map_epoch > highest_map_epoch_.load()) highest_map_epoch_ = reply->map_epoch;
    if (reply->step > highest_step_.load()) highest_step_ = reply->step;
    std::lock_guard<std::mutex> lock(mu_);
    Health& h = server.health;
    const std::string me = role_ + " " + std::to_string(task_index_) + ": ";
    if (!h.up) {
      LOG(WARNING) << me << Name(s) << " is back after "
                   << std::chrono::duration<double>(now - h.down_since).count() << " s";
      h.up = true;
      ++h.generation;
    } else if (h.incarnation != 0 && reply->incarnation != h.incarnation) {
      LOG(WARNING) << me << Name(s) << " restarted (a new process answers)";
      ++h.generation;
    }
    h.incarnation = reply->incarnation;
  }
}

}  // namespace worker
}  // namespace pstrain
