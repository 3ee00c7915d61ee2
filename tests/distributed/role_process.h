// Real pstrain processes for the distributed tests: fork+exec with the output
// in a log file, the flags of a one-server cluster, and reading a log back.
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_env.h"

namespace pstrain {
namespace testing {

// Starts `args` (args[0]: the program) with `env` added to its environment and
// its stdout and stderr in `log_path` ("" keeps the test's own); returns the
// child's pid.
inline pid_t SpawnProcess(std::vector<std::string> args, const std::string &log_path = "",
                          const std::map<std::string, std::string> &env = {}) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  if (!log_path.empty()) {
    FILE *f = std::fopen(log_path.c_str(), "w");
    if (f == nullptr) _exit(126);
    dup2(fileno(f), 1);
    dup2(fileno(f), 2);
  }
  for (const auto &[name, value] : env) setenv(name.c_str(), value.c_str(), 1);
  std::vector<char *> argv;
  for (auto &a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv(argv[0], argv.data());
  _exit(127);
}

// SIGKILLs and reaps *pid if it is a child still to reap; sets it to -1.
inline void KillProcess(pid_t *pid) {
  if (*pid <= 0) return;
  kill(*pid, SIGKILL);
  waitpid(*pid, nullptr, 0);
  *pid = -1;
}

// `pstrain --job_name=ps` as the only server of a cluster of two workers, on
// `port`, with the plain-SGD config of tests/distributed/testdata/sgd.yaml
// (every value a test can predict).
inline std::vector<std::string> SingleServerArgs(int port, const std::string &train_dir) {
  return {PSTRAIN_BINARY,
          "--job_name=ps",
          "--task_index=0",
          "--ps_hosts=127.0.0.1:" + std::to_string(port),
          "--worker_hosts=127.0.0.1:1,127.0.0.1:2",
          "--config=" + SourceDir() + "/tests/distributed/testdata/sgd.yaml",
          "--train_dir=" + train_dir};
}

inline std::string ReadFile(const std::string &path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace testing
}  // namespace pstrain
