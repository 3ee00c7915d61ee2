// Real roles started as Kubeflow's TFJob operator starts them: no cluster flags, only
// TF_CONFIG in the environment. A ps, a chief and a worker train a tiny model to the end, with an
// evaluator that TF_CONFIG's cluster leaves out (as the operator writes it); an explicit flag wins
// over TF_CONFIG; a malformed TF_CONFIG stops the role at start naming the field. (No Kubernetes
// cluster runs here: the operator's part is the environment it writes.)
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "tests/distributed/ports.h"
#include "tests/distributed/role_process.h"
#include "tests/test_env.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;

// Waits up to `seconds` for `pid` to exit; its exit code, or -1 (and killed) if it did not.
int WaitFor(pid_t pid, int seconds) {
  for (int i = 0; i < seconds * 20; ++i) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  testing::KillProcess(&pid);
  return -1;
}

std::string TfConfig(int ps, int chief, int worker, const std::string& type, int index) {
  const auto at = [](int port) { return "\"127.0.0.1:" + std::to_string(port) + "\""; };
  return "{\"cluster\": {\"ps\": [" + at(ps) + "], \"chief\": [" + at(chief) + "], \"worker\": [" +
         at(worker) + "]}, \"task\": {\"type\": \"" + type +
         "\", \"index\": " + std::to_string(index) + "}, \"environment\": \"cloud\"}";
}

TEST(TfConfigProcessTest, RolesStartedWithOnlyTfConfigTrainTogether) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed (dataset-fashion-mnist)";
  }
  const int ps = testing::PickPort(), chief = testing::PickPort(), worker = testing::PickPort();
  const std::string dir = ::testing::TempDir() + "/tf_config_" + std::to_string(ps);
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::vector<std::string> common = {
      PSTRAIN_BINARY, "--config=" + testing::SourceDir() + "/tests/worker/testdata/tiny.yaml",
      "--train_dir=" + dir, "--max_steps=20", "--log_every_n_steps=10"};
  std::vector<pid_t> pids;
  // The evaluator first, absent from the cluster as the operator writes it, so the others count
  // no evaluator: it must not hold up the end. The chief starts once it is connected.
  for (const auto& [type, index] : std::vector<std::pair<std::string, int>>{
           {"evaluator", 0}, {"ps", 0}, {"chief", 0}, {"worker", 0}}) {
    for (int i = 0; type == "chief" && i < 1200; ++i) {
      if (ReadFile(dir + "/evaluator.log").find("the end does not wait") != std::string::npos) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    pids.push_back(testing::SpawnProcess(
        common, dir + "/" + type + ".log",
        {{"TF_CONFIG", TfConfig(ps, chief, worker, type, index)}, {"CUDA_VISIBLE_DEVICES", ""}}));
  }
  const int chief_code = WaitFor(pids[2], 240);
  const int worker_code = WaitFor(pids[3], 60);
  const int ps_code = WaitFor(pids[1], 60);
  const int evaluator_code = WaitFor(pids[0], 90);
  const std::string chief_log = ReadFile(dir + "/chief.log");
  EXPECT_EQ(chief_code, 0) << chief_log;
  EXPECT_EQ(worker_code, 0) << ReadFile(dir + "/worker.log");
  EXPECT_EQ(ps_code, 0) << ReadFile(dir + "/ps.log");
  const std::string evaluator_log = ReadFile(dir + "/evaluator.log");
  EXPECT_EQ(evaluator_code, 0) << evaluator_log;
  EXPECT_NE(evaluator_log.find("this one evaluates while training runs, but the end does not wait "
                               "for it"),
            std::string::npos)
      << evaluator_log;
  // It evaluated, or the run (20 tiny steps, about a second) ended while it waited or pulled:
  // each says so and exits 0.
  EXPECT_TRUE(evaluator_log.find("test accuracy") != std::string::npos ||
              evaluator_log.find("so has this uncounted evaluator") != std::string::npos ||
              evaluator_log.find("ended before this uncounted evaluator saw the model") !=
                  std::string::npos)
      << evaluator_log;
  EXPECT_NE(chief_log.find("TF_CONFIG: --job_name=worker --task_index=0 --ps_hosts=127.0.0.1:" +
                           std::to_string(ps)),
            std::string::npos)
      << chief_log;
  // Both workers push: the last update may take the step one past 20.
  const size_t done = chief_log.find("done: global step ");
  ASSERT_NE(done, std::string::npos) << chief_log;
  EXPECT_GE(std::atoi(chief_log.c_str() + done + 18), 20) << chief_log;
  // TF's worker 0 is pstrain's worker 1, behind the chief.
  EXPECT_NE(ReadFile(dir + "/worker.log").find("--task_index=1"), std::string::npos);
}

TEST(TfConfigProcessTest, ExplicitFlagsWinAndAMalformedTfConfigStopsTheRoleNamingTheField) {
  const int port = testing::PickPort();
  const std::string dir = ::testing::TempDir() + "/tf_config_bad_" + std::to_string(port);
  fs::create_directories(dir);
  pid_t bad = testing::SpawnProcess(
      {PSTRAIN_BINARY, "--train_dir=" + dir}, dir + "/bad.log",
      {{"TF_CONFIG", R"({"cluster": {"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]},
                         "task": {"type": "worker", "index": 4}})"}});
  EXPECT_EQ(WaitFor(bad, 20), 2);
  EXPECT_NE(ReadFile(dir + "/bad.log")
                .find("TF_CONFIG: task.index 4 is out of range for 1 worker task(s)"),
            std::string::npos)
      << ReadFile(dir + "/bad.log");

  // TF_CONFIG says worker; the explicit --job_name=ps --task_index=0 win, and the server serves.
  std::vector<std::string> args = testing::SingleServerArgs(port, dir + "/train");
  args.erase(args.begin() + 1, args.begin() + 5);  // keep the binary, config and train_dir
  args.push_back("--job_name=ps");
  args.push_back("--task_index=0");
  pid_t ps = testing::SpawnProcess(
      args, dir + "/ps.log",
      {{"TF_CONFIG", TfConfig(port, testing::PickPort(), testing::PickPort(), "worker", 0)},
       {"CUDA_VISIBLE_DEVICES", ""}});
  bool serving = false;
  for (int i = 0; i < 200 && !serving; ++i) {
    serving = ReadFile(dir + "/ps.log").find("serving on") != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const std::string log = ReadFile(dir + "/ps.log");
  testing::KillProcess(&ps);
  EXPECT_TRUE(serving) << log;
  EXPECT_NE(log.find("given explicitly, so kept: --job_name --task_index"), std::string::npos)
      << log;
}

// The race behind a once-flaky end: the uncounted evaluator heard the server while nothing was
// initialised, and the run ended and its server exited between two of its tries. With the server
// gone for the unavailable timeout the evaluator ends, saying so, rather than waiting out
// its 300 s for a chief of a run that is over.
TEST(TfConfigProcessTest, AnUncountedEvaluatorWhoseServersWentBeforeInitEndsSayingSo) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed (dataset-fashion-mnist)";
  }
  const int port = testing::PickPort();
  const std::string dir = ::testing::TempDir() + "/tf_config_gone_" + std::to_string(port);
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::vector<std::string> common = {
      PSTRAIN_BINARY,
      "--config=" + testing::SourceDir() + "/tests/worker/testdata/tiny.yaml",
      "--train_dir=" + dir,
      "--ps_hosts=127.0.0.1:" + std::to_string(port),
      "--worker_hosts=127.0.0.1:" + std::to_string(testing::PickPort()),
      "--evaluators=0",
      "--ps_unavailable_timeout_secs=2"};
  auto role = [&](const std::string& job) {
    std::vector<std::string> args = common;
    args.push_back("--job_name=" + job);
    args.push_back("--task_index=0");
    return testing::SpawnProcess(args, dir + "/" + job + ".log", {{"CUDA_VISIBLE_DEVICES", ""}});
  };
  pid_t ps = role("ps");
  pid_t evaluator = role("evaluator");
  bool heard = false;
  for (int i = 0; i < 1200 && !heard; ++i) {  // its first try answered: "waiting", no reason
    heard =
        ReadFile(dir + "/evaluator.log").find("initialise the variables\n") != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  testing::KillProcess(&ps);
  const int code = WaitFor(evaluator, 60);
  const std::string log = ReadFile(dir + "/evaluator.log");
  ASSERT_TRUE(heard) << log;
  EXPECT_EQ(code, 0) << log;
  EXPECT_NE(log.find("the servers ended before this uncounted evaluator saw the model"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("the servers answered, then went away"), std::string::npos) << log;
}

}  // namespace
}  // namespace pstrain
