// Warnings about refused connection attempts, without flooding the log: a ZeroMQ client
// reconnects by itself every 100 ms, so one stray client is refused again and again. Each kind
// of refusal (a key: what, from where) is logged at most once per interval, saying how many
// like it were left out since. Inside the wire library.
#pragma once

#include <glog/logging.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace pstrain {
namespace wire {

class RefusalLog {
 public:
  static constexpr std::chrono::seconds kInterval{10};
  // Distinct keys remembered; beyond that the memory is cleared (and each is logged again).
  static constexpr size_t kMaxKeys = 1000;

  // The process's one log (the ZAP handler and every socket's monitor write to it).
  static RefusalLog& Instance() {
    static auto* log = new RefusalLog;  // never destroyed: the ZAP thread may outlive statics
    return *log;
  }

  // Logs `message` as a warning from `file`:`line` (the caller's, via PSTRAIN_REFUSAL_WARNING)
  // unless one with the same `key` was logged within the interval.
  void Warn(const char* file, int line, const std::string& key, const std::string& message) {
    const auto now = std::chrono::steady_clock::now();
    int64_t left_out = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (entries_.size() >= kMaxKeys && entries_.count(key) == 0) entries_.clear();
      Entry& e = entries_[key];
      if (e.logged && now - e.last < kInterval) {
        ++e.left_out;
        return;
      }
      left_out = e.left_out;
      e = Entry{true, now, 0};
    }
    google::LogMessage(file, line, google::GLOG_WARNING).stream()
        << message
        << (left_out > 0 ? " (" + std::to_string(left_out) + " more like it since the last report)"
                         : "");
  }

 private:
  struct Entry {
    bool logged = false;
    std::chrono::steady_clock::time_point last;
    int64_t left_out = 0;
  };
  std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

}  // namespace wire
}  // namespace pstrain

#define PSTRAIN_REFUSAL_WARNING(key, message) \
  ::pstrain::wire::RefusalLog::Instance().Warn(__FILE__, __LINE__, key, message)
