// Each real parameter server writes its own TensorBoard scalars in <logdir>/ps-<task>
// (ps/server_summary.h): two servers, one holding almost all the bytes, a chief that pushes
// seven steps, and the event files read back after the chief's shutdown. The counts are what
// the chief sent, and the unbalanced shard shows in the scalars.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include "tests/distributed/ports.h"
#include "tests/distributed/role_process.h"
#include "tests/distributed/sgd_variables.h"
#include "tests/summary/event_test_util.h"
#include "worker/distributed/ps_client.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;
using testing::SgdVariables;

// Waits up to `timeout` for `pid` to exit; its exit status, or -1.
int WaitExit(pid_t* pid, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(*pid, &status, WNOHANG) == *pid) {
      *pid = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

struct Scalars {
  std::map<std::string, std::vector<float>> values;  // tag -> values in order
  float Last(const std::string& tag) const {
    auto it = values.find(tag);
    return it == values.end() || it->second.empty() ? -1 : it->second.back();
  }
  float Sum(const std::string& tag) const {
    float sum = 0;
    if (auto it = values.find(tag); it != values.end()) {
      for (float v : it->second) sum += v;
    }
    return sum;
  }
};

Scalars ReadRun(const std::string& dir) {
  Scalars s;
  const auto files = EventFiles(dir);
  EXPECT_EQ(files.size(), 1u) << dir;
  if (files.size() != 1) return s;
  auto events = ReadEvents(files[0]);
  EXPECT_TRUE(events.ok()) << events.status().ToString();
  if (!events.ok()) return s;
  for (const auto& e : events.value()) {
    for (const auto& v : e.summary().value()) s.values[v.tag()].push_back(v.simple_value());
  }
  return s;
}

class PsSummaryProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/ps_summary_" + std::to_string(getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (int k = 0; k < 2; ++k) ports_.push_back(testing::PickPort());
    while (ports_[1] == ports_[0]) ports_[1] = testing::PickPort();
    for (int k = 0; k < 2; ++k) hosts_.push_back("127.0.0.1:" + std::to_string(ports_[k]));
    for (int k = 0; k < 2; ++k) {
      std::vector<std::string> args = testing::SingleServerArgs(ports_[k], dir_);
      args[2] = "--task_index=" + std::to_string(k);
      args[3] = "--ps_hosts=" + hosts_[0] + "," + hosts_[1];
      args.push_back("--logdir=" + dir_ + "/logs");
      args.push_back("--ps_summary_secs=0.25");
      pids_[k] = testing::SpawnProcess(args, Log(k), {});
    }
  }
  void TearDown() override {
    for (pid_t& pid : pids_) testing::KillProcess(&pid);
    if (!HasFailure()) fs::remove_all(dir_);
  }
  std::string Log(int k) const { return dir_ + "/ps-" + std::to_string(k) + ".log"; }

  std::string dir_;
  std::vector<int> ports_;
  std::vector<std::string> hosts_;
  pid_t pids_[2] = {-1, -1};
};

TEST_F(PsSummaryProcessTest, EachServerCountsWhatItWasSentAndTheHeavyShardStandsOut) {
  // A large table and a small bias: greedy placement puts the table on ps 0, the bias on ps 1.
  worker::Variable table = SgdVariables::Make("embedding/table", Shape{256, 64}, 1.0f);
  worker::Variable bias = SgdVariables::Make("fc/bias", Shape{64}, 0.5f);
  auto connected = worker::PsClient::Connect(hosts_, "chief", 0, {&table, &bias}, 8 << 20);
  ASSERT_TRUE(connected.ok()) << connected.status().ToString();
  auto chief = std::move(connected).value();
  chief->set_unavailable_timeout(std::chrono::seconds(60));
  const std::vector<int64_t> loads = chief->sharding().Loads();
  ASSERT_EQ(loads, (std::vector<int64_t>{256 * 64 * 4, 64 * 4}));
  auto init = chief->Initialize(0, dir_);
  ASSERT_TRUE(init.ok()) << init.status().ToString();
  int64_t step = 0;
  for (int i = 0; i < 7; ++i) {  // seven pushes to each server, over a few intervals
    table.grad.Fill(0.01f);
    bias.grad.Fill(0.01f);
    auto r = chief->PushAndPull(step);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    step = r->global_step;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(step, 7);
  ASSERT_TRUE(chief->Shutdown().ok());
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(WaitExit(&pids_[k], std::chrono::seconds(20)), 0)
        << "ps " << k << " did not stop cleanly; its log: " << Log(k);
  }

  Scalars ps[2] = {ReadRun(dir_ + "/logs/ps-0"), ReadRun(dir_ + "/logs/ps-1")};
  for (int k = 0; k < 2; ++k) {
    const Scalars& s = ps[k];
    SCOPED_TRACE("ps " + std::to_string(k));
    EXPECT_GE(s.values.at("ps/pushes_per_sec").size(), 2u) << "one interval, or none";
    EXPECT_EQ(s.Last("ps/pushes_total"), 7);
    // In: the chief's initial values and seven gradients of this server's shard.
    EXPECT_EQ(s.Last("ps/bytes_in_total"), static_cast<float>(8 * loads[k]));
    // Out: every pull answered with the whole shard.
    const float pulls = s.Last("ps/pulls_total");
    EXPECT_GE(pulls, 7);
    EXPECT_EQ(s.Last("ps/bytes_out_total"), pulls * loads[k]);
    EXPECT_EQ(s.Sum("ps/refused"), 0);
    EXPECT_EQ(s.Sum("ps/rejected"), 0);
    EXPECT_EQ(s.Sum("ps/dropped_stale"), 0);
    EXPECT_GT(s.Sum("ps/apply_ms"), 0);
  }
  // The imbalance, as TensorBoard draws it: ps 0 takes 256 times the bytes of ps 1.
  EXPECT_EQ(ps[0].Last("ps/bytes_in_total"), 256 * ps[1].Last("ps/bytes_in_total"));
  // Rates: the intervals of the two processes start apart, so only roughly 256 times.
  EXPECT_GT(ps[0].Sum("ps/bytes_in_per_sec"), 16 * ps[1].Sum("ps/bytes_in_per_sec"));
  EXPECT_EQ(ps[0].Last("ps/pushes_total"), ps[1].Last("ps/pushes_total"));  // same requests

  // TensorBoard's own reader lists each server's directory as a run with the scalars.
  const std::string python = TestPythonFromEnv();
  const std::string script = ScriptPath("read_with_tensorboard.py");
  if (python.empty() || script.empty()) {
    GTEST_SKIP() << "no test venv (scripts/test-venv.sh BUILD_DIR): TensorBoard not checked";
  }
  for (int k = 0; k < 2; ++k) {
    const CommandResult run = RunPython(python, script, {dir_ + "/logs/ps-" + std::to_string(k)});
    if (run.exit_code == 3) GTEST_SKIP() << "tensorboard cannot be imported by " << python;
    ASSERT_EQ(run.exit_code, 0);
    EXPECT_NE(run.out.find("\"ps/bytes_in_per_sec\""), std::string::npos) << run.out;
  }
}

}  // namespace
}  // namespace pstrain
