// Whole clusters of real processes on loopback: 2 parameter servers, 2 workers and an
// evaluator train RefNet on Fashion-MNIST to the accuracy target, with the servers'
// update modes and with the workers syncing within their host.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/wire/transport.h"
#include "tests/distributed/ports.h"
#include "tests/distributed/role_process.h"
#include "tests/test_env.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

using testing::ReadFile;

struct ClusterResult {
  std::map<std::string, int> exit_codes;
  std::map<std::string, std::string> logs;
};

ClusterResult RunClusterOnce(const std::string& name, const std::vector<std::string>& flags) {
  // Unique per process: two checkouts' test runs on one machine must not share a train_dir.
  const std::string dir =
      ::testing::TempDir() + "/cluster_" + name + "_" + std::to_string(getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string ps_hosts, worker_hosts;
  for (int i = 0; i < 2; ++i)
    ps_hosts += (i ? "," : "") + ("127.0.0.1:" + std::to_string(testing::PickPort()));
  for (int i = 0; i < 2; ++i) {
    worker_hosts += (i ? "," : "") + ("127.0.0.1:" + std::to_string(testing::PickPort()));
  }
  std::vector<std::string> common{"--ps_hosts=" + ps_hosts,
                                  "--worker_hosts=" + worker_hosts,
                                  "--config=" + testing::SourceDir() + "/configs/refnet.yaml",
                                  "--train_dir=" + dir,
                                  "--evaluators=1",
                                  "--eval_interval_secs=20",
                                  "--log_every_n_steps=100"};
  common.insert(common.end(), flags.begin(), flags.end());
  std::vector<std::pair<std::string, std::vector<std::string>>> roles{
      {"ps0", {"--job_name=ps", "--task_index=0"}},
      {"ps1", {"--job_name=ps", "--task_index=1"}},
      {"worker0", {"--job_name=worker", "--task_index=0"}},
      {"worker1", {"--job_name=worker", "--task_index=1"}},
      {"evaluator", {"--job_name=evaluator", "--task_index=0"}}};
  std::map<pid_t, std::string> running;
  for (auto& [role, args] : roles) {
    args.insert(args.begin(), PSTRAIN_BINARY);
    args.insert(args.end(), common.begin(), common.end());
    const std::string log = dir + "/" + role + ".log";
    // What the launcher sets for local roles: servers never see a GPU, the two workers split
    // the cores, idle OpenMP threads sleep, big buffers come from huge pages.
    std::map<std::string, std::string> env{{"OMP_WAIT_POLICY", "PASSIVE"},
                                           {"GLIBC_TUNABLES", "glibc.malloc.hugetlb=1"}};
    if (role.rfind("ps", 0) == 0) env["CUDA_VISIBLE_DEVICES"] = "";
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const bool worker = role.rfind("worker", 0) == 0;
    env["OMP_NUM_THREADS"] = std::to_string(worker ? std::max(1L, cores / 2) : 1);
    running[testing::SpawnProcess(args, log, env)] = role;
  }
  ClusterResult result;
  // Every role must end by itself; a hang is killed after 15 minutes and reported as -1.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(15);
  while (!running.empty()) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0 && running.count(pid)) {
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      result.exit_codes[running[pid]] = code;
      running.erase(pid);
      if (code == 0) continue;
      // As the launcher does: one role failed, the others are stopped (and reported as -1).
      for (auto& [p, role] : running) {
        kill(p, SIGKILL);
        waitpid(p, nullptr, 0);
        result.exit_codes[role] = -1;
      }
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      for (auto& [p, role] : running) {
        kill(p, SIGKILL);
        waitpid(p, nullptr, 0);
        result.exit_codes[role] = -1;
      }
      break;
    }
    usleep(200 * 1000);
  }
  for (auto& [role, args] : roles) result.logs[role] = ReadFile(dir + "/" + role + ".log");
  return result;
}

// A server that lost its port to another process between the pick and its bind is a race of
// the test, not a failure of pstrain: run again on other ports.
ClusterResult RunCluster(const std::string& name, const std::vector<std::string>& flags) {
  ClusterResult r;
  for (int attempt = 0; attempt < 3; ++attempt) {
    r = RunClusterOnce(name, flags);
    bool port_taken = false;
    for (const char* ps : {"ps0", "ps1"}) {
      port_taken |= r.logs[ps].find("Address already in use") != std::string::npos;
    }
    if (!port_taken) break;
  }
  return r;
}

double LastAccuracy(const std::string& log, const std::string& marker) {
  size_t at = log.rfind(marker);
  if (at == std::string::npos) return 0;
  return std::atof(log.c_str() + at + marker.size());
}

void ExpectTrainedTo(const ClusterResult& r, double target) {
  for (const auto& [role, code] : r.exit_codes) {
    EXPECT_EQ(code, 0) << role << " failed:\n" << r.logs.at(role).substr(0, 20000);
  }
  const double chief = LastAccuracy(r.logs.at("worker0"), "test accuracy ");
  const double evaluator = LastAccuracy(r.logs.at("evaluator"), "test accuracy ");
  EXPECT_GE(chief, target) << r.logs.at("worker0").substr(0, 20000);
  EXPECT_GE(evaluator, target) << r.logs.at("evaluator");
  // Both servers held variables and stopped cleanly on the chief's shutdown.
  for (const char* ps : {"ps0", "ps1"}) {
    EXPECT_NE(r.logs.at(ps).find("shutdown requested by chief 0"), std::string::npos) << ps;
  }
}

TEST(ClusterTest, AsyncTwoServersTwoWorkersAndEvaluatorReach90Percent) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed (dataset-fashion-mnist)";
  }
  ClusterResult r = RunCluster("async", {"--update_mode=async", "--epochs=4"});
  ExpectTrainedTo(r, 0.90);
}

TEST(ClusterTest, AccumulateTwoServersTwoWorkersAndEvaluatorReach90Percent) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed (dataset-fashion-mnist)";
  }
  // Each update averages two workers' gradients (an effective batch of 256).
  ClusterResult r = RunCluster("accumulate", {"--update_mode=accumulate", "--accumulate_n=2",
                                              "--max_staleness=1", "--max_steps=1400"});
  ExpectTrainedTo(r, 0.90);
  EXPECT_NE(r.logs.at("ps0").find("stale dropped"), std::string::npos);
}

TEST(ClusterTest, IntraNodeSyncAveragesTheHostsWorkersAndPushesOncePerStep) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed (dataset-fashion-mnist)";
  }
  // Both workers are on 127.0.0.1: they average their gradients through worker 0's hub and
  // worker 0 alone pushes (an effective batch of 256 per update, as the accumulate test).
  ClusterResult r = RunCluster("intra_node", {"--intra_node_sync=cpu", "--max_steps=1400"});
  ExpectTrainedTo(r, 0.90);
  EXPECT_NE(r.logs.at("worker0").find("syncs with workers [0,1] on host 127.0.0.1 over the host "
                                      "hub (host memory) as local rank 0 of 2"),
            std::string::npos);
  EXPECT_NE(r.logs.at("worker1").find("worker 0 (the leader) pushes for the host"),
            std::string::npos);
  // One push per step for the host: each worker's every local step is one global step (without
  // the sync the two workers' local steps would add up to the global steps).
  for (const char* worker : {"worker0", "worker1"}) {
    EXPECT_NE(r.logs.at(worker).find("reached step 1400 after 1400 local steps"), std::string::npos)
        << worker << ":\n"
        << r.logs.at(worker).substr(0, 20000);
  }
}

}  // namespace
}  // namespace pstrain
