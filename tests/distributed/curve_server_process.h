// A real parameter server (`pstrain --job_name=ps`, one server of two workers and `evaluators`
// evaluators) started with --curve_keys from a fresh cluster key directory, its output in a log
// file: for the tests of who may connect and what each role may ask.
#pragma once

#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/wire/curve.h"
#include "tests/distributed/ports.h"
#include "tests/distributed/role_process.h"

namespace pstrain {
namespace testing {

// `pstrain --job_name=ps` with its output in a log file. Keys are written for `servers` servers;
// the process is ps 0 unless Start's flags say otherwise (the last of a repeated flag counts).
class CurveServerProcess {
 public:
  explicit CurveServerProcess(const std::string& name, int evaluators = 0, int servers = 1) {
    port_ = PickPort();
    dir_ = ::testing::TempDir() + "/curve_ps_" + name + "_" + std::to_string(port_);
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    keys_ = dir_ + "/keys";
    Status written = wire::WriteClusterKeys(keys_, servers, 2, evaluators);
    CHECK(written.ok()) << written.ToString();
  }
  ~CurveServerProcess() { KillProcess(&pid_); }
  void Start(const std::string& keys_flag, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = SingleServerArgs(port_, dir_ + "/train");
    args.push_back("--update_mode=async");
    args.push_back("--curve_keys=" + keys_flag);
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = SpawnProcess(args, log_path());
  }
  // Waits for the process to exit; its exit code, or -1 if it ran on for 20 s.
  int Wait() {
    for (int i = 0; i < 400; ++i) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }
  pid_t pid() const { return pid_; }
  bool Alive() { return pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0; }
  int port() const { return port_; }
  std::string endpoint() const { return "tcp://127.0.0.1:" + std::to_string(port_); }
  const std::string& keys() const { return keys_; }
  std::string log_path() const { return dir_ + "/ps.log"; }
  // Waits up to 10 s for the log to hold `text`.
  bool LogHas(const std::string& text) {
    for (int i = 0; i < 200; ++i) {
      if (ReadFile(log_path()).find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

 private:
  int port_ = 0;
  pid_t pid_ = -1;
  std::string dir_, keys_;
};

}  // namespace testing
}  // namespace pstrain
