// pstrain-train re-executes itself with OMP_WAIT_POLICY=PASSIVE when the user has not set it
// (tools/train_main.cc): checked on a real process, by the environment the kernel shows for it
// (/proc/PID/environ) while it waits to read its config from a FIFO, and by its log.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace pstrain {
namespace {

struct Observed {
  std::string environment;  // its environment once it reads its config, each entry after a '\n'
  std::string log;          // its stdout and stderr
  int exit_code = -1;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Starts pstrain-train with OMP_WAIT_POLICY unset (`policy` null) or set to `policy`, its config
// a FIFO: when the FIFO has a reader, the process has run (and re-executed) past its flags.
// Then reads its environment, closes the FIFO (an empty config: it stops with an error).
Observed RunUntilItReadsItsConfig(const char* policy) {
  Observed o;
  const std::string dir = ::testing::TempDir() + "/train_main_test_" + std::to_string(getpid()) +
                          (policy ? std::string("_") + policy : "_unset");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string fifo = dir + "/config.yaml", log = dir + "/log";
  EXPECT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  const std::string config_flag = "--config=" + fifo, dir_flag = "--train_dir=" + dir;
  pid_t pid = fork();
  if (pid == 0) {
    if (policy) {
      setenv("OMP_WAIT_POLICY", policy, 1);
    } else {
      unsetenv("OMP_WAIT_POLICY");
    }
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(PSTRAIN_TRAIN_BINARY, PSTRAIN_TRAIN_BINARY, config_flag.c_str(), dir_flag.c_str(),
          nullptr);
    _exit(127);
  }
  EXPECT_GT(pid, 0);
  // Opening a FIFO for writing without blocking succeeds once it has a reader (ENXIO before).
  int fd = -1;
  int status = 0;
  bool exited = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (fd < 0 && !exited && std::chrono::steady_clock::now() < deadline) {
    fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd < 0) {
      exited = waitpid(pid, &status, WNOHANG) == pid;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  if (fd >= 0) {
    o.environment = "\n" + ReadFile("/proc/" + std::to_string(pid) + "/environ");
    for (char& c : o.environment) c = c == '\0' ? '\n' : c;
    close(fd);
  } else {
    ADD_FAILURE() << "pstrain-train never opened its config " << fifo
                  << (exited ? " (it exited)" : " within 60 s");
    if (!exited) kill(pid, SIGKILL);
  }
  if (!exited) waitpid(pid, &status, 0);
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  o.log = ReadFile(log);
  std::filesystem::remove_all(dir);
  return o;
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

const char kSaid[] = "OMP_WAIT_POLICY was unset: running with OMP_WAIT_POLICY=PASSIVE";

TEST(TrainMainTest, WithoutOmpWaitPolicyItRunsWithPassiveWaitsAndSaysSoOnce) {
  Observed o = RunUntilItReadsItsConfig(nullptr);
  EXPECT_NE(o.environment.find("\nOMP_WAIT_POLICY=PASSIVE\n"), std::string::npos) << o.environment;
  EXPECT_EQ(Count(o.log, kSaid), 1) << o.log;
  // Then the empty config stops it, naming the file: the run went on as usual.
  EXPECT_NE(o.exit_code, 0);
  EXPECT_NE(o.log.find("config.yaml: expected a map"), std::string::npos) << o.log;
}

TEST(TrainMainTest, TheUsersOwnOmpWaitPolicyWins) {
  Observed o = RunUntilItReadsItsConfig("ACTIVE");
  EXPECT_NE(o.environment.find("\nOMP_WAIT_POLICY=ACTIVE\n"), std::string::npos) << o.environment;
  EXPECT_EQ(o.environment.find("PASSIVE"), std::string::npos) << o.environment;
  EXPECT_EQ(Count(o.log, "OMP_WAIT_POLICY"), 0) << o.log;
}

}  // namespace
}  // namespace pstrain
