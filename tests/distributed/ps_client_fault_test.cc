// A worker's PsClient against a real parameter-server process that is killed with SIGKILL and
// started again: heartbeats find it dead within seconds, requests wait and are sent again, and
// a server that comes back is initialised again by the chief from its current values, with or
// without a checkpoint on disk. The whole-cluster version is fault_test.py.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include "tests/distributed/ports.h"
#include "tests/distributed/role_process.h"
#include "tests/distributed/sgd_variables.h"
#include "tests/test_env.h"
#include "worker/distributed/ps_client.h"

namespace pstrain {
namespace {

using Clock = std::chrono::steady_clock;

class ServerProcess {
 public:
  explicit ServerProcess(int port) : port_(port) {
    dir_ = ::testing::TempDir() + "/ps_fault_" + std::to_string(port_);
    std::filesystem::remove_all(dir_);
  }
  ~ServerProcess() { Kill(); }
  void Start() { pid_ = testing::SpawnProcess(testing::SingleServerArgs(port_, dir_)); }
  void Kill() { testing::KillProcess(&pid_); }
  const std::string& dir() const { return dir_; }

 private:
  int port_;
  pid_t pid_ = -1;
  std::string dir_;
};

using Variables = testing::SgdVariables;

class PsClientFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = testing::PickPort();
    ps_ = std::make_unique<ServerProcess>(port_);
    ps_->Start();
    auto c = worker::PsClient::Connect({"127.0.0.1:" + std::to_string(port_)}, "chief", 0,
                                       vars_.all(), 8 << 20);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(c).value();
    client_->set_unavailable_timeout(std::chrono::seconds(60));
    ASSERT_TRUE(client_->Initialize(0).ok());
  }
  // Steps of SGD with learning rate 1: each subtracts `g` from every value.
  void Step(float g) {
    vars_.SetGradients(g);
    auto r = client_->PushAndPull(step_);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    step_ = r->global_step;
  }
  // Kills the server, checks that the heartbeats notice within a few seconds, and starts it
  // again after `down_for`.
  double KillAndNotice() {
    ps_->Kill();
    const auto killed = Clock::now();
    while (client_->ServerHealth(0).up && Clock::now() - killed < std::chrono::seconds(20)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return std::chrono::duration<double>(Clock::now() - killed).count();
  }

  int port_ = 0;
  Variables vars_;
  std::unique_ptr<ServerProcess> ps_;
  std::unique_ptr<worker::PsClient> client_;
  int64_t step_ = 0;
};

TEST_F(PsClientFaultTest, AKilledServerIsFoundDeadAndItsReplacementReinitialisedByTheChief) {
  Step(0.25f);
  Step(0.25f);  // values 0.5 / 0.0, global step 2
  const int64_t generation = client_->ServerHealth(0).generation;
  const double noticed = KillAndNotice();
  EXPECT_LT(noticed, 6.0) << "a dead server should be noticed within a few seconds";
  EXPECT_FALSE(client_->ServerHealth(0).up);
  // The next step waits for the server, which comes back empty (no checkpoint was saved): the
  // chief gives it its current values, and the push is applied to them.
  auto restart = std::async(std::launch::async, [this] {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    ps_->Start();
  });
  Step(0.25f);
  restart.get();
  // The heartbeats (once a second) see it back, under a new generation.
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!client_->ServerHealth(0).up && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(client_->ServerHealth(0).up);
  EXPECT_GT(client_->ServerHealth(0).generation, generation);
  EXPECT_FLOAT_EQ(vars_.weights.value[0], 0.25f);
  EXPECT_FLOAT_EQ(vars_.bias.value[1], -0.25f);
  EXPECT_EQ(step_, 3);  // re-initialised at the chief's step 2, then one update
}

TEST_F(PsClientFaultTest, AStepPushedInPartsCountsOnceAndIsAppliedOnceAcrossARestart) {
  // Every variable a part of its own (weights, then bias, backward's order reversed: bias first).
  client_->set_push_part_bytes(1);
  auto step_in_parts = [&](float g) {
    client_->BeginStep(step_);
    vars_.SetGradients(g);
    ASSERT_TRUE(client_->Ready(&vars_.bias).ok());
    ASSERT_TRUE(client_->Ready(&vars_.weights).ok());
    auto r = client_->FinishStep();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    step_ = r->global_step;
  };
  step_in_parts(0.25f);
  step_in_parts(0.25f);
  EXPECT_EQ(step_, 2);  // two parts a step, each step counted once
  EXPECT_FLOAT_EQ(vars_.weights.value[0], 0.5f);
  EXPECT_FLOAT_EQ(vars_.bias.value[0], 0.0f);
  KillAndNotice();
  // The parts go out while the server is down; it comes back empty, the chief initialises it
  // from its values at step 2 and the parts are sent again, each applied once.
  auto restart = std::async(std::launch::async, [this] {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    ps_->Start();
  });
  step_in_parts(0.25f);
  restart.get();
  EXPECT_FLOAT_EQ(vars_.weights.value[0], 0.25f);
  EXPECT_FLOAT_EQ(vars_.bias.value[1], -0.25f);
  EXPECT_EQ(step_, 3);
  step_in_parts(0.25f);
  EXPECT_FLOAT_EQ(vars_.weights.value[0], 0.0f);
  EXPECT_EQ(step_, 4);
}

TEST_F(PsClientFaultTest, AServerRestartedUnderALiveChiefTakesItsValuesNotItsCheckpoint) {
  Step(0.25f);
  ASSERT_TRUE(client_->Checkpoint(step_, ps_->dir()).ok());  // at step 1: weights 0.75
  Step(0.25f);                                               // 0.5, lost with the process
  KillAndNotice();
  ps_->Start();
  // The server does not roll itself back to its checkpoint: the chief's values at step 2 go
  // back in (tests/distributed/cluster_checkpoint_test.cc has the cluster-wide restore).
  Step(0.25f);
  EXPECT_FLOAT_EQ(vars_.weights.value[0], 0.25f);
  EXPECT_EQ(step_, 3);
}

TEST_F(PsClientFaultTest, AWorkerWaitsForTheChiefToReinitialiseARestartedServer) {
  Variables mine;
  auto c = worker::PsClient::Connect({"127.0.0.1:" + std::to_string(port_)}, "worker", 1,
                                     mine.all(), 8 << 20);
  ASSERT_TRUE(c.ok());
  auto worker = std::move(c).value();
  ASSERT_TRUE(worker->Pull().ok());
  KillAndNotice();
  ps_->Start();
  // The worker's pull meets an empty server and waits; the chief's next step fills it.
  auto pulled = std::async(std::launch::async, [&] { return worker->Pull(); });
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_EQ(pulled.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  Step(0.5f);
  auto step = pulled.get();
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_FLOAT_EQ(mine.weights.value[0], 0.5f);
}

TEST_F(PsClientFaultTest, ARequestTheDeadServerHadAlreadyReceivedIsSentAgain) {
  // The chief waits at a barrier: its request sits in ps 0, which dies with it. Only a resend
  // to the restarted server lets the barrier complete when worker 1 arrives.
  auto result = std::make_shared<std::promise<Status>>();
  std::future<Status> chief_done = result->get_future();
  std::thread([this, result] { result->set_value(client_->Barrier("b", 2)); }).detach();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the request has arrived
  KillAndNotice();
  ps_->Start();
  Variables mine;
  auto c = worker::PsClient::Connect({"127.0.0.1:" + std::to_string(port_)}, "worker", 1,
                                     mine.all(), 8 << 20);
  ASSERT_TRUE(c.ok());
  // Detached, both: if the behaviour breaks they never return, and the test must still end.
  std::shared_ptr<worker::PsClient> worker = std::move(c).value();
  auto arrived = std::make_shared<std::promise<Status>>();
  std::future<Status> worker_done = arrived->get_future();
  std::thread([worker, arrived] { arrived->set_value(worker->Barrier("b", 2)); }).detach();
  ASSERT_EQ(chief_done.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "the chief's barrier was lost with the server and never sent again";
  EXPECT_TRUE(chief_done.get().ok());
  ASSERT_EQ(worker_done.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(worker_done.get().ok());
}

TEST_F(PsClientFaultTest, AServerThatStaysDownFailsTheRequestNamingIt) {
  client_->set_unavailable_timeout(std::chrono::seconds(2));
  KillAndNotice();
  vars_.SetGradients(0.1f);
  auto r = client_->PushAndPull(step_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("ps 0 (127.0.0.1:" + std::to_string(port_) + ")"),
            std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace pstrain
