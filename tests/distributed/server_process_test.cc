// A real parameter-server process (pstrain --job_name=ps) on loopback, driven by a test client
// speaking the wire protocol: stale gradients are dropped, bad pushes change nothing.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "common/wire/transport.h"
#include "tests/distributed/ports.h"
#include "tests/distributed/role_process.h"
#include "tests/test_env.h"

namespace pstrain {
namespace {

using std::chrono::milliseconds;
using wire::Message;
using wire::MessageType;

class ServerProcess {
 public:
  explicit ServerProcess(const std::vector<std::string>& extra) {
    port_ = testing::PickPort();
    dir_ = ::testing::TempDir() + "/ps_" + std::to_string(port_);
    std::filesystem::remove_all(dir_);
    std::vector<std::string> args = testing::SingleServerArgs(port_, dir_);
    for (std::string arg : extra) {  // "{port}" stands for the server's own port
      const size_t at = arg.find("{port}");
      if (at != std::string::npos) arg.replace(at, 6, std::to_string(port_));
      args.push_back(arg);
    }
    pid_ = testing::SpawnProcess(args);
    auto c = wire::Connection::Connect("tcp://127.0.0.1:" + std::to_string(port_));
    client_ = std::move(c).value();
  }
  ~ServerProcess() { testing::KillProcess(&pid_); }
  // Retries until the process is listening.
  // Sends as worker 0 (or as the role `m` names), numbering pushes as a worker does, and as a
  // worker pulls before each push (a server takes one push per pull).
  Result<Message> Call(Message m) {
    if (m.role.empty()) m.role = "worker";
    m.task_index = 0;
    m.incarnation = wire::ProcessIncarnation();
    if (m.type == MessageType::kPush && m.sequence == 0) {
      m.sequence = ++pushes_;
      Message pull = m;
      pull.type = MessageType::kPull;
      pull.tensors.clear();
      pull.sequence = 0;
      pull.step = 0;
      (void)client_->Call(pull, milliseconds(5000));
    }
    for (int i = 0;; ++i) {
      auto r = client_->Call(m, milliseconds(i < 20 ? 500 : 5000));
      if (r.ok() || r.status().code() != StatusCode::kUnavailable || i > 20) return r;
    }
  }
  bool Alive() { return waitpid(pid_, nullptr, WNOHANG) == 0; }
  int port() const { return port_; }

 private:
  int port_ = 0;
  uint64_t pushes_ = 0;
  pid_t pid_ = -1;
  std::string dir_;
  std::unique_ptr<wire::Connection> client_;
};

Message Init() {
  Message m;
  m.type = MessageType::kRegister;
  m.role = "chief";
  m.tensors.push_back({"fc/weights", Tensor::Filled(Shape{2, 4}, 1.0f)});
  m.tensors.push_back({"fc/bias", Tensor::Filled(Shape{2}, 0.5f)});
  return m;
}

Message Push(int64_t step, float g) {
  Message m;
  m.type = MessageType::kPush;
  m.step = step;
  m.tensors.push_back({"fc/weights", Tensor::Filled(Shape{2, 4}, g)});
  return m;
}

float PulledWeight(ServerProcess* ps, int64_t* step = nullptr) {
  Message pull;
  pull.type = MessageType::kPull;
  pull.names = {"fc/weights"};
  auto r = ps->Call(pull);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (step) *step = r->step;
  return r->tensors.at(0).tensor[0];
}

TEST(ServerProcessTest, StaleGradientIsDroppedAndCounted) {
  ServerProcess ps({"--update_mode=accumulate", "--accumulate_n=2", "--max_staleness=0"});
  ASSERT_TRUE(ps.Call(Init()).ok());
  // Two gradients from version 0 make one update with their mean: 1 - 1.0 * (0.5 + 1.5) / 2.
  auto r = ps.Call(Push(0, 0.5f));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->value, 0);
  ASSERT_TRUE(ps.Call(Push(0, 1.5f)).ok());
  int64_t step = -1;
  EXPECT_FLOAT_EQ(PulledWeight(&ps, &step), 0.0f);
  EXPECT_EQ(step, 1);
  // A third gradient computed from version 0 is now stale: dropped, and it changes nothing.
  r = ps.Call(Push(0, 100.0f));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->value, -1) << "the reply marks a dropped push";
  EXPECT_NE(r->text.find("stale"), std::string::npos) << r->text;
  ASSERT_TRUE(ps.Call(Push(1, 1.0f)).ok());  // a fresh one alone does not make an update
  EXPECT_FLOAT_EQ(PulledWeight(&ps, &step), 0.0f);
  EXPECT_EQ(step, 1);
}

// With --replicas a server serves a shard only as the head the chief's shard map names
// (ps/server_task.h); before a map, and for another task's shard, it answers kAborted.
TEST(ServerProcessTest, WithReplicasAShardIsServedOnlyOnceTheChiefsMapMakesThisServerItsHead) {
  ServerProcess ps({"--ps_hosts=127.0.0.1:{port},127.0.0.1:1", "--replicas=1"});
  auto r = ps.Call(Init());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kAborted) << r.status().ToString();
  EXPECT_NE(r.status().message().find("not the head of shard 0 at map epoch 0"), std::string::npos)
      << r.status().message();

  Message set;
  set.type = MessageType::kShardMap;
  set.role = "chief";
  set.map_epoch = 1;
  set.chains = {{0, {0}, {1}}, {1, {1}, {}}};
  r = ps.Call(set);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->map_epoch, 1u);
  Message init = Init();
  init.shard = 0;
  r = ps.Call(init);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->map_epoch, 1u);
  EXPECT_EQ(r->shard, 0);
  EXPECT_FLOAT_EQ(PulledWeight(&ps), 1.0f);

  Message pull;
  pull.type = MessageType::kPull;
  pull.shard = 1;
  r = ps.Call(pull);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not the head of shard 1 at map epoch 1 (head: task 1)"),
            std::string::npos)
      << r.status().message();
  Message get;
  get.type = MessageType::kShardMap;
  r = ps.Call(get);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->map_epoch, 1u);
  EXPECT_EQ(r->chains, set.chains);
}

TEST(ServerProcessTest, MalformedMisshapenUnknownAndNanPushesChangeNothing) {
  ServerProcess ps({"--update_mode=async"});
  ASSERT_TRUE(ps.Call(Init()).ok());
  const float before = PulledWeight(&ps);

  Message wrong_shape = Push(0, 1.0f);
  wrong_shape.tensors[0].tensor = Tensor::Filled(Shape{4, 2}, 1.0f);
  auto r = ps.Call(wrong_shape);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("has shape [4,2], the variable has [2,4]"), std::string::npos)
      << r.status().message();

  Message unknown = Push(0, 1.0f);
  unknown.tensors.push_back({"no/such", Tensor::Filled(Shape{1}, 1.0f)});
  r = ps.Call(unknown);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no variable named 'no/such'"), std::string::npos);

  Message nan = Push(0, 1.0f);
  nan.tensors[0].tensor[3] = std::numeric_limits<float>::quiet_NaN();
  r = ps.Call(nan);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("NaN or Inf"), std::string::npos);

  // Raw garbage frames from a plain ZeroMQ socket.
  void* ctx = zmq_ctx_new();
  void* raw = zmq_socket(ctx, ZMQ_DEALER);
  ASSERT_EQ(zmq_connect(raw, ("tcp://127.0.0.1:" + std::to_string(ps.port())).c_str()), 0);
  const char garbage[] = "this is not a capnp message at all";
  zmq_send(raw, garbage, sizeof(garbage), ZMQ_SNDMORE);
  zmq_send(raw, garbage, 5, 0);
  char reply[4096];
  zmq_pollitem_t item{raw, 0, ZMQ_POLLIN, 0};
  ASSERT_EQ(zmq_poll(&item, 1, 5000), 1) << "no error reply to a malformed message";
  int n = zmq_recv(raw, reply, sizeof(reply), 0);
  EXPECT_GT(n, 0);
  int linger = 0;
  zmq_setsockopt(raw, ZMQ_LINGER, &linger, sizeof(linger));
  zmq_close(raw);
  zmq_ctx_term(ctx);

  EXPECT_TRUE(ps.Alive());
  EXPECT_EQ(PulledWeight(&ps), before) << "a refused push changed a variable";
  // And a good push still works.
  ASSERT_TRUE(ps.Call(Push(0, 0.25f)).ok());
  EXPECT_FLOAT_EQ(PulledWeight(&ps), before - 0.25f);
}

TEST(ServerProcessTest, AMessageAboveMaxMessageMbIsRefusedAndChangesNothing) {
  ServerProcess ps({"--update_mode=async", "--max_message_mb=1"});
  Message init = Init();
  init.tensors.push_back({"big/a", Tensor::Filled(Shape{200000}, 0.0f)});  // 800 KB each
  init.tensors.push_back({"big/b", Tensor::Filled(Shape{200000}, 0.0f)});
  init.tensors.resize(3);  // fc/weights, fc/bias and big/a: 0.8 MB, under the limit
  ASSERT_TRUE(ps.Call(init).ok());
  const float before = PulledWeight(&ps);
  // Two 800 KB gradients in one push: 1.6 MB, above 1 MiB in all.
  Message push = Push(0, 1.0f);
  push.tensors.push_back({"big/a", Tensor::Filled(Shape{200000}, 1.0f)});
  push.tensors.push_back({"big/a", Tensor::Filled(Shape{200000}, 1.0f)});
  auto r = ps.Call(push);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("above the limit max_total_bytes=1048576"), std::string::npos)
      << r.status().message();
  EXPECT_TRUE(ps.Alive());
  EXPECT_EQ(PulledWeight(&ps), before);
}

TEST(RoleFlagsTest, MaxMessageMbOutOfRangeStopsAtStart) {
  std::string out;
  FILE* p = popen((std::string(PSTRAIN_BINARY) +
                   " --job_name=ps --ps_hosts=127.0.0.1:1 --worker_hosts=127.0.0.1:2 "
                   "--train_dir=/tmp/x --max_message_mb=0 2>&1")
                      .c_str(),
                  "r");
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  const int status = pclose(p);
  EXPECT_EQ(WEXITSTATUS(status), 2) << out;
  EXPECT_NE(out.find("--max_message_mb must be from 1 to 1048576 (MiB), got 0"), std::string::npos)
      << out;
}

// Runs the binary with `args`; returns the exit code, output in *out.
int RunRole(const std::string& args, std::string* out) {
  FILE* p = popen((std::string(PSTRAIN_BINARY) + " " + args + " 2>&1").c_str(), "r");
  char buf[4096];
  out->clear();
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out->append(buf, n);
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(RoleFlagsTest, MissingOrContradictoryFlagsStopAtStartNamingTheFlag) {
  const std::string hosts =
      "--ps_hosts=127.0.0.1:1 --worker_hosts=127.0.0.1:2 --train_dir=" + ::testing::TempDir() +
      "/flags";
  const std::vector<std::pair<std::string, std::string>> cases{
      {"--job_name=chief " + hosts, "--job_name must be ps, worker or evaluator, got 'chief'"},
      {"--job_name=worker --worker_hosts=127.0.0.1:2 --train_dir=/tmp/x", "--ps_hosts is required"},
      {"--job_name=worker --task_index=3 " + hosts,
       "--task_index=3 is out of range for 1 worker task(s)"},
      {"--job_name=ps --accumulate_n=2 " + hosts,
       "--accumulate_n applies only to --update_mode=accumulate"},
      {"--job_name=ps --update_mode=sync --backup_workers=1 " + hosts,
       "--backup_workers must be below the number of pushing workers (1)"},
      {"--job_name=ps --intra_node_sync=ring " + hosts,
       "--intra_node_sync must be off, cpu or nccl, got 'ring'"},
      // Two workers on one host that sync within it push as one.
      {"--job_name=ps --update_mode=sync --backup_workers=1 --intra_node_sync=cpu "
       "--ps_hosts=127.0.0.1:1 --worker_hosts=10.0.0.1:2,10.0.0.1:3 --train_dir=/tmp/x",
       "--backup_workers must be below the number of pushing workers (1)"},
      {"--job_name=ps --ps_hosts=nohost --worker_hosts=127.0.0.1:2 --train_dir=/tmp/x",
       "--ps_hosts entry 'nohost' is not host:port"},
      {"--job_name=worker --replicas=1 " + hosts,
       "--replicas=1 needs at least 2 servers in --ps_hosts, got 1"},
      {"--job_name=worker --replicas=1 --elastic_data --ps_hosts=127.0.0.1:1,127.0.0.1:3 "
       "--worker_hosts=127.0.0.1:2 --train_dir=/tmp/x",
       "--elastic_data and --replicas=1 do not go together yet"},
  };
  for (const auto& [args, message] : cases) {
    std::string out;
    EXPECT_EQ(RunRole(args, &out), 2) << args << "\n" << out;
    EXPECT_NE(out.find(message), std::string::npos) << args << "\n" << out;
  }
  std::string out;
  EXPECT_EQ(RunRole("--helpshort", &out), 1);  // gflags' own exit code for help
  EXPECT_NE(out.find("-job_name"), std::string::npos) << out;
  EXPECT_NE(out.find("-update_mode"), std::string::npos) << out;
  EXPECT_NE(out.find("--model_dir (TensorFlow 1): --train_dir"), std::string::npos) << out;
  // A TensorFlow 1 spelling pstrain has no flag for stops at start, naming what to use.
  EXPECT_EQ(RunRole("--job_name=worker --batch_size=64 " + hosts, &out), 1) << out;
  EXPECT_NE(out.find("--batch_size is TensorFlow 1's flag; pstrain has no flag for it: set "
                     "`batch_size:` under `train:` in the config"),
            std::string::npos)
      << out;
  // The chief's warm start reads its checkpoint before connecting: a missing one stops it at once.
  EXPECT_EQ(
      RunRole("--job_name=worker --config=" + testing::SourceDir() +
                  "/configs/smallnet.yaml --checkpoint_path=/nonexistent/model.ckpt-5 " + hosts,
              &out),
      1)
      << out;
  EXPECT_NE(out.find("--checkpoint_path=/nonexistent/model.ckpt-5 (the warm start)"),
            std::string::npos)
      << out;
  // One it has is taken: --sync_replicas is --update_mode=sync, checked as such.
  EXPECT_EQ(RunRole("--job_name=ps --sync_replicas --backup_workers=1 " + hosts, &out), 2) << out;
  EXPECT_NE(out.find("--backup_workers must be below the number of pushing workers (1)"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace pstrain
