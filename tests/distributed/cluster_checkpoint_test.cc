// Cluster checkpoints with real server processes and the chief's PsClient: a step is committed
// only once every shard has saved it; after all servers die between two shards' saves, a new
// chief restores the newest committed step on every shard, never one shard's newer file; a
// server restarted under a live chief takes the chief's current values, not its older file.
#include "common/checkpoint/cluster_checkpoint.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/distributed/ports.h"
#include "tests/distributed/role_process.h"
#include "tests/distributed/sgd_variables.h"
#include "worker/distributed/ps_client.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;
using testing::SgdVariables;

class ClusterCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/cluster_ckpt_" + std::to_string(getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (int k = 0; k < 2; ++k) ports_.push_back(testing::PickPort());
    while (ports_[1] == ports_[0]) ports_[1] = testing::PickPort();
    for (int k = 0; k < 2; ++k) hosts_.push_back("127.0.0.1:" + std::to_string(ports_[k]));
    for (int k = 0; k < 2; ++k) Start(k);
  }
  void TearDown() override {
    for (pid_t& pid : pids_) testing::KillProcess(&pid);
    if (!HasFailure()) fs::remove_all(dir_);
  }
  void Start(int k) {
    std::vector<std::string> args = testing::SingleServerArgs(ports_[k], dir_);
    args[2] = "--task_index=" + std::to_string(k);
    args[3] = "--ps_hosts=" + hosts_[0] + "," + hosts_[1];
    pids_[k] = testing::SpawnProcess(args, Log(k), {});
  }
  void Kill(int k) { testing::KillProcess(&pids_[k]); }
  std::string Log(int k) const { return dir_ + "/ps-" + std::to_string(k) + ".log"; }
  std::string ShardFile(int k, int64_t step) const {
    return ShardDirectory(dir_, k, 2) + "/" + CheckpointName(step);
  }
  std::unique_ptr<worker::PsClient> Chief(SgdVariables* vars) {
    auto c = worker::PsClient::Connect(hosts_, "chief", 0, vars->all(), 8 << 20);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (!c.ok()) return nullptr;
    c.value()->set_unavailable_timeout(std::chrono::seconds(60));
    return std::move(c).value();
  }
  // One SGD step of gradient `g` (learning rate 1); returns the new global step.
  static int64_t Step(worker::PsClient* client, SgdVariables* vars, int64_t step, float g) {
    vars->SetGradients(g);
    auto r = client->PushAndPull(step);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->global_step : -1;
  }
  std::vector<int64_t> Committed() const {
    auto steps = ReadCommittedSteps(dir_);
    return steps.ok() ? steps.value() : std::vector<int64_t>{-1};
  }

  std::string dir_;
  std::vector<int> ports_;
  std::vector<std::string> hosts_;
  pid_t pids_[2] = {-1, -1};
};

TEST_F(ClusterCheckpointTest, AStepIsCommittedOnceEveryShardSavedItAndOnlyCommittedStepsRestore) {
  SgdVariables vars;
  auto chief = Chief(&vars);
  ASSERT_NE(chief, nullptr);
  auto init = chief->Initialize(0, dir_);
  ASSERT_TRUE(init.ok()) << init.status().ToString();
  EXPECT_FALSE(init->restored);
  int64_t step = Step(chief.get(), &vars, 0, 0.25f);  // weights 0.75, bias 0.25
  ASSERT_TRUE(chief->Checkpoint(step, dir_).ok());
  EXPECT_EQ(Committed(), (std::vector<int64_t>{step}));
  const int64_t committed = step;

  // ps 1 cannot save the next step (its shard directory is in the way): ps 0 saves it, ps 1
  // fails, and the step is not committed.
  step = Step(chief.get(), &vars, step, 0.25f);  // weights 0.5
  fs::rename(ShardDirectory(dir_, 1, 2), dir_ + "/aside");
  std::ofstream(ShardDirectory(dir_, 1, 2)) << "not a directory";
  Status failed = chief->Checkpoint(step, dir_);
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("ps 1"), std::string::npos) << failed.ToString();
  EXPECT_TRUE(fs::exists(ShardFile(0, step)));
  EXPECT_EQ(Committed(), (std::vector<int64_t>{committed}));
  fs::remove(ShardDirectory(dir_, 1, 2));
  fs::rename(dir_ + "/aside", ShardDirectory(dir_, 1, 2));

  // Every server and the chief die. A new chief restores the committed step on both shards,
  // though ps 0 holds a newer file whole.
  chief.reset();
  Kill(0);
  Kill(1);
  Start(0);
  Start(1);
  SgdVariables fresh;
  auto again = Chief(&fresh);
  ASSERT_NE(again, nullptr);
  init = again->Initialize(0, dir_);
  ASSERT_TRUE(init.ok()) << init.status().ToString();
  ASSERT_TRUE(init->restored);
  EXPECT_EQ(*init->restored, committed);
  auto pulled = again->Pull();
  ASSERT_TRUE(pulled.ok()) << pulled.status().ToString();
  EXPECT_EQ(*pulled, committed);
  EXPECT_FLOAT_EQ(fresh.weights.value[0], 0.75f);  // ps 0's shard
  EXPECT_FLOAT_EQ(fresh.bias.value[0], 0.25f);     // ps 1's shard
  for (int k = 0; k < 2; ++k) {
    EXPECT_NE(testing::ReadFile(Log(k)).find("restored its shard of committed step " +
                                             std::to_string(committed)),
              std::string::npos)
        << "ps " << k << "'s log:\n"
        << testing::ReadFile(Log(k));
  }
  EXPECT_FALSE(fs::exists(ShardFile(0, step)));  // the abandoned step is gone from ps 0
}

TEST_F(ClusterCheckpointTest, AServerRestartedUnderALiveChiefTakesItsValuesNotItsOlderFile) {
  SgdVariables vars;
  auto chief = Chief(&vars);
  ASSERT_NE(chief, nullptr);
  ASSERT_TRUE(chief->Initialize(0, dir_).ok());
  int64_t step = Step(chief.get(), &vars, 0, 0.25f);
  ASSERT_TRUE(chief->Checkpoint(step, dir_).ok());  // weights 0.75 in the files
  step = Step(chief.get(), &vars, step, 0.25f);     // 0.5, only in memory
  Kill(0);
  Start(0);
  // The chief's next step finds ps 0 empty and gives it its values (0.5), not the file's 0.75:
  // rolling one shard back behind the other would mix steps.
  step = Step(chief.get(), &vars, step, 0.25f);
  EXPECT_FLOAT_EQ(vars.weights.value[0], 0.25f);
  EXPECT_FLOAT_EQ(vars.bias.value[0], -0.25f);
  EXPECT_EQ(step, 3);
  EXPECT_EQ(testing::ReadFile(Log(0)).find("restored its shard"), std::string::npos);
}

}  // namespace
}  // namespace pstrain
