// What glog printed while a CapturedLog lived, for tests that check a warning names a file, a
// step or a peer. glog calls sinks from whichever thread logs, so lines are kept under a lock.
#pragma once

#include <glog/logging.h>

#include <mutex>
#include <string>
#include <vector>

namespace pstrain {
namespace testing {

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
  // The first line holding every one of `parts` ("" if none): "WARNING: ..." for a warning.
  std::string Find(const std::vector<std::string>& parts) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& line : lines_) {
      bool all = true;
      for (const std::string& p : parts) all = all && line.find(p) != std::string::npos;
      if (all) return line;
    }
    return "";
  }
  // Everything captured, a line each (for a failing assertion's message).
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

}  // namespace testing
}  // namespace pstrain
