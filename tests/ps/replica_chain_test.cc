// Chain replication of one shard (docs/replication.md sections 3-5), driven in-process: several
// ParameterServers of shard 0, one per task, pass their records, copies and acknowledgements
// through a FIFO the test delivers by hand (as gloo's tests run ranks over an in-memory store),
// so that each test can hold, lose or reorder what a network would.
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "common/wire/curve.h"
#include "ps/parallel.h"
#include "ps/server.h"

namespace pstrain {
namespace ps {
namespace {

using wire::Message;
using wire::MessageType;

// "w" is large enough for the optimizers' and clipping's threaded loops (ps/parallel.h).
constexpr int64_t kW = kMinParallelElements + 1000;

constexpr char kSgd[] = "{optimizer: {type: sgd}, learning_rate: {initial: 1.0}}";
constexpr char kAdamClipped[] =
    "{optimizer: {type: adam}, learning_rate: {initial: 0.01}, clipping: {by_norm: 0.5}}";
constexpr char kRmsPropByValue[] =
    "{optimizer: {type: rmsprop, momentum: 0.9}, learning_rate: {initial: 0.01},"
    " clipping: {by_value: [-0.3, 0.3]}}";

struct Options {
  UpdateMode mode = UpdateMode::kAsync;
  int workers = 2;
  int accumulate_n = 0;
  int64_t max_staleness = 0;
  std::string config = kSgd;
  std::string keys_dir;  // a cluster's keys (wire::WriteClusterKeys): records are tagged
};

// The servers of shard 0 on tasks 0..n-1 and the messages between them.
class Cluster {
 public:
  Cluster(int tasks, const Options& o) : options_(o) {
    for (int t = 0; t < tasks; ++t) servers_[t] = Make(t, o.config);
  }

  std::unique_ptr<ParameterServer> Make(int task, const std::string& config) {
    ServerOptions so;
    so.task_index = task;
    so.num_ps = 3;
    so.shard = 0;
    so.replicas = 2;
    so.mode = options_.mode;
    so.num_workers = options_.workers;
    so.accumulate_n = options_.accumulate_n;
    so.max_staleness = options_.max_staleness;
    if (!options_.keys_dir.empty()) {
      const std::string t = std::to_string(task);
      so.keys = wire::LoadClusterKeys(options_.keys_dir + "/ps-" + t, "ps", task).value();
    }
    auto parsed = ConfigNode::Parse(config, "train");
    return std::make_unique<ParameterServer>(so, VariableStore::FromConfig(*parsed).value());
  }

  ParameterServer& at(int task) { return *servers_.at(task); }
  void Replace(int task, std::unique_ptr<ParameterServer> s) { servers_[task] = std::move(s); }

  // The chief's register, with the same initial values on each task given.
  void Initialize(const std::vector<int>& tasks) {
    for (int t : tasks) {
      Message init;
      init.type = MessageType::kRegister;
      init.role = "chief";
      init.task_index = 0;
      init.incarnation = 1;
      init.tensors.push_back({"w", Tensor::Filled(Shape{kW}, 10.0f)});
      init.tensors.push_back({"b", Tensor::Filled(Shape{8}, -1.0f)});
      init.tensors.push_back({"bn", Tensor::Filled(Shape{4}, 0.0f)});
      Take(t, at(t).Handle("chief", init));
      if (t != tasks[0]) at(t).TakeChainLinkForTest(at(tasks[0]));
    }
    replies.clear();
  }

  // Every task in `tasks` and `joining` takes the chain of map `epoch`.
  void SetChain(uint64_t epoch, std::vector<int> tasks, std::vector<int> joining = {},
                std::vector<int> told = {}) {
    if (told.empty()) {
      told = tasks;
      told.insert(told.end(), joining.begin(), joining.end());
    }
    for (int t : told) {
      Take(t, at(t).SetChain({epoch, tasks, joining, t}));
    }
  }

  // A request from worker `worker` to task `task`.
  void Send(int task, int worker, Message m) {
    m.role = "worker";
    m.task_index = worker;
    m.incarnation = 1;
    Threads(task);
    Take(task, at(task).Handle("w" + std::to_string(worker), m));
  }

  // The worker's next push (or, with `retry`, its last one again).
  Message PushOf(int worker, int64_t step, std::vector<std::pair<std::string, Tensor>> tensors,
                 bool retry = false) {
    Message m;
    m.type = MessageType::kPush;
    m.step = step;
    m.sequence = retry ? sequence_[worker] : ++sequence_[worker];
    m.request_id = ++request_id_;
    for (auto& [name, t] : tensors) m.tensors.push_back({name, t});
    return m;
  }
  void Push(int task, int worker, int64_t step, float g) {
    Send(task, worker, PushOf(worker, step, {{"w", Tensor::Filled(Shape{kW}, g)}}));
  }
  void Retry(int task, int worker, int64_t step, float g) {
    Send(task, worker, PushOf(worker, step, {{"w", Tensor::Filled(Shape{kW}, g)}}, true));
  }
  Message Pull(int task, int worker) {
    Message m;
    m.type = MessageType::kPull;
    m.request_id = ++request_id_;
    Send(task, worker, m);
    EXPECT_FALSE(replies.empty());
    Message r = replies.back().message;
    replies.pop_back();
    return r;
  }

  struct InFlight {
    int from, to;
    Message message;
    bool reply;
  };
  std::deque<InFlight> wire;  // server to server, in order
  struct Answered {
    int task;
    std::string peer;
    Message message;
  };
  std::vector<Answered> replies;  // to workers and the chief

  // Delivers the oldest message between servers.
  void Step() {
    InFlight f = std::move(wire.front());
    wire.pop_front();
    const std::string name = "ps-" + std::to_string(f.from);
    Threads(f.to);
    Take(f.to, f.reply ? at(f.to).HandleServerReply(f.from, f.message)
                       : at(f.to).Handle(name, f.message, name));
  }
  void Run() {
    while (!wire.empty()) Step();
  }
  // The serve loop's turn between requests on task `task`, as at time `now` (a head with a
  // joiner stamps an idle shard).
  void Tick(int task, std::chrono::steady_clock::time_point now) {
    Take(task, at(task).CheckMembership(now));
  }
  void Lose() { wire.pop_front(); }

 private:
  // The head (task 0) on 4 OpenMP threads, the backups on 1 (sshd gives multihost roles
  // OMP_NUM_THREADS=1): replicas agree whatever their thread counts.
  static void Threads(int task) { omp_set_num_threads(task == 0 ? 4 : 1); }

  void Take(int from, std::vector<ParameterServer::Outgoing> out) {
    for (auto& o : out) {
      if (o.task >= 0) {
        wire.push_back({from, o.task, std::move(o.message), false});
      } else if (o.peer.rfind("ps-", 0) == 0) {
        wire.push_back({from, std::stoi(o.peer.substr(3)), std::move(o.message), true});
      } else {
        replies.push_back({from, o.peer, std::move(o.message)});
      }
    }
  }

  Options options_;
  std::map<int, std::unique_ptr<ParameterServer>> servers_;
  std::map<int, uint64_t> sequence_;
  uint64_t request_id_ = 0;
};

// Values and slots, byte for byte.
void ExpectBitwiseEqual(const ParameterServer& a, const ParameterServer& b) {
  const auto sa = a.store().StateTensors(), sb = b.store().StateTensors();
  ASSERT_EQ(sa.size(), sb.size());
  for (const auto& [name, t] : sa) {
    ASSERT_TRUE(sb.count(name)) << name;
    const Tensor& u = sb.at(name);
    ASSERT_EQ(t.size(), u.size()) << name;
    EXPECT_EQ(std::memcmp(t.data(), u.data(), t.bytes()), 0) << "'" << name << "' differs";
  }
  EXPECT_EQ(a.global_step(), b.global_step());
}

// Random pushes of every kind a worker sends: whole and in parts (async), with assigned values,
// computed from old steps (stale drops where staleness is bounded).
void RandomPushes(Cluster* c, int n, int workers, UpdateMode mode, std::mt19937* rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  auto random = [&](int64_t size) {
    Tensor t(Shape{size});
    for (int64_t i = 0; i < size; ++i) t[i] = g(*rng);
    return t;
  };
  for (int i = 0; i < n; ++i) {
    const int worker = static_cast<int>((*rng)() % workers);
    const int64_t now = c->at(0).global_step();
    const int64_t step = std::max<int64_t>(0, now - static_cast<int64_t>((*rng)() % 3));
    const int kind = static_cast<int>((*rng)() % 4);
    if (mode == UpdateMode::kAsync && kind == 0) {  // one step in two parts
      Message first = c->PushOf(worker, step, {{"w", random(kW)}});
      first.value = 1;
      c->Send(0, worker, first);
      c->Send(0, worker, c->PushOf(worker, step, {{"b", random(8)}}));
    } else {
      Message m = c->PushOf(worker, step, {{"w", random(kW)}, {"b", random(8)}});
      if (kind == 1) {
        m.tensors.push_back({"bn", random(4)});
        m.assigns.push_back("bn");
      }
      c->Send(0, worker, m);
    }
    if ((*rng)() % 3 == 0) c->Run();  // records in flight across several pushes
  }
  c->Run();
}

struct EqualCase {
  UpdateMode mode;
  const char* config;
  const char* name;
};

class BitwiseTest : public ::testing::TestWithParam<EqualCase> {};

TEST_P(BitwiseTest, ABackupApplyingTheRecordsEndsBitwiseEqualToItsHead) {
  Options o;
  o.mode = GetParam().mode;
  o.config = GetParam().config;
  o.workers = 3;
  o.max_staleness = 1;
  Cluster c(3, o);
  c.Initialize({0, 1, 2});
  c.SetChain(1, {0, 1, 2});
  std::mt19937 rng(7);
  RandomPushes(&c, 100, 3, o.mode, &rng);
  EXPECT_GT(c.at(0).global_step(), 10);
  ExpectBitwiseEqual(c.at(0), c.at(1));
  ExpectBitwiseEqual(c.at(0), c.at(2));
  EXPECT_GT(c.at(0).stats().bytes_replicated, 0);
  EXPECT_EQ(c.at(2).stats().records_replicated, 0) << "the tail forwards nothing";
  if (o.mode != UpdateMode::kAsync) {
    EXPECT_GT(c.at(0).stats().dropped_stale, 0) << "stale drops are records too";
  }
}

INSTANTIATE_TEST_SUITE_P(
    ModesAndOptimizers, BitwiseTest,
    ::testing::Values(EqualCase{UpdateMode::kAsync, kSgd, "AsyncSgd"},
                      EqualCase{UpdateMode::kAsync, kAdamClipped, "AsyncAdamClippedByNorm"},
                      EqualCase{UpdateMode::kAsync, kRmsPropByValue, "AsyncRmsPropClippedByValue"},
                      EqualCase{UpdateMode::kAccumulate, kSgd, "AccumulateSgd"},
                      EqualCase{UpdateMode::kAccumulate, kAdamClipped, "AccumulateAdamClipped"},
                      EqualCase{UpdateMode::kSync, kAdamClipped, "SyncAdamClipped"},
                      EqualCase{UpdateMode::kSync, kRmsPropByValue, "SyncRmsPropClipped"}),
    [](const ::testing::TestParamInfo<EqualCase>& info) { return std::string(info.param.name); });

TEST(ReplicaChainTest, APushIsAcknowledgedOnlyOnceTheTailHasItsUpdate) {
  Cluster c(3, Options{});
  c.Initialize({0, 1, 2});
  c.SetChain(1, {0, 1, 2});
  c.Push(0, 0, 0, 1.0f);
  EXPECT_TRUE(c.replies.empty()) << "no reply before the chain has the update";
  ASSERT_EQ(c.wire.size(), 1u);  // the record to the middle
  c.Step();                      // the middle applies it and forwards it to the tail
  EXPECT_EQ(c.at(1).global_step(), 1);
  ASSERT_EQ(c.wire.size(), 1u);
  EXPECT_EQ(c.wire.front().to, 2);
  c.Step();  // the tail applies it and acknowledges to the middle
  EXPECT_EQ(c.at(2).global_step(), 1);
  c.Step();  // the middle acknowledges to the head
  EXPECT_TRUE(c.replies.empty());
  c.Step();  // the head releases the reply
  ASSERT_EQ(c.replies.size(), 1u);
  EXPECT_EQ(c.replies[0].message.type, MessageType::kOk);
  EXPECT_EQ(c.replies[0].message.step, 1);
  EXPECT_EQ(c.replies[0].message.map_epoch, 1u);
}

// A predecessor's key used from elsewhere: a record with the next sequence number and
// the right sender, but not made from this chain's records (its link differs, or it has none), is
// refused and changes nothing; the real record is taken after it, and the replicas stay equal.
TEST(ReplicaChainTest, ARecordThatDoesNotFollowTheChainsRecordsIsRefusedAndChangesNothing) {
  Cluster c(2, Options{});
  c.Initialize({0, 1});
  c.SetChain(1, {0, 1});
  for (int round = 0; round < 2; ++round) {
    c.Push(0, 0, round, 1.0f);
    ASSERT_EQ(c.wire.size(), 1u);
    Message forged = c.wire.front().message;  // its sequence and sender are right
    for (auto& t : forged.tensors) t.tensor = Tensor::Filled(t.tensor.shape(), 1000.0f);
    for (const std::string& link : {wire::NewChainLink(), std::string()}) {
      forged.link = link;
      auto out = c.at(1).Handle("ps-0", forged, "ps-0");
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].message.type, MessageType::kError);
      EXPECT_NE(out[0].message.text.find("does not follow the records this replica of shard 0 "
                                         "holds"),
                std::string::npos)
          << out[0].message.text;
      EXPECT_EQ(c.at(1).global_step(), round) << "a forged record moved the backup";
    }
    c.Run();  // the real record, its acknowledgement and the worker's reply
    EXPECT_EQ(c.at(1).global_step(), round + 1);
    ExpectBitwiseEqual(c.at(0), c.at(1));
    ASSERT_EQ(c.replies.size(), 1u);
    EXPECT_EQ(c.replies[0].message.type, MessageType::kOk) << c.replies[0].message.text;
    c.replies.clear();
  }
  EXPECT_EQ(c.at(1).stats().rejected, 4);
}

TEST(ReplicaChainTest, ARecordSentAgainIsHeldOnceAndMustBeTheRecordTheReplicaHolds) {
  Cluster c(3, Options{});
  c.Initialize({0, 1, 2});
  c.SetChain(1, {0, 1, 2});
  c.Push(0, 0, 0, 1.0f);
  ASSERT_EQ(c.wire.size(), 1u);
  const Message record = c.wire.front().message;
  c.Step();  // the backup applies it and forwards it to the tail; its acknowledgement waits
  ASSERT_EQ(c.wire.size(), 1u);
  const size_t pending = c.at(1).pending_requests();
  for (int i = 0; i < 100; ++i) {
    auto out = c.at(1).Handle("ps-0", record, "ps-0");
    EXPECT_TRUE(out.empty()) << "held until the tail has it: " << out[0].message.text;
  }
  EXPECT_LE(c.at(1).pending_requests(), pending + 1) << "one held acknowledgement per sequence";

  Message forged = record;
  forged.link = wire::NewChainLink();
  for (auto& t : forged.tensors) t.tensor = Tensor::Filled(t.tensor.shape(), 1000.0f);
  auto out = c.at(1).Handle("ps-0", forged, "ps-0");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.type, MessageType::kError);
  EXPECT_NE(out[0].message.text.find("is not the record this replica holds"), std::string::npos)
      << out[0].message.text;

  c.Run();
  EXPECT_EQ(c.at(1).pending_requests(), 0u);
  ExpectBitwiseEqual(c.at(0), c.at(1));
  ExpectBitwiseEqual(c.at(0), c.at(2));
  ASSERT_EQ(c.replies.size(), 1u);
  EXPECT_EQ(c.replies[0].message.type, MessageType::kOk) << c.replies[0].message.text;
}

TEST(ReplicaChainTest, AnAccumulatePushWaitsForItsWindowsReplicatedUpdate) {
  Options o;
  o.mode = UpdateMode::kAccumulate;
  o.accumulate_n = 2;
  Cluster c(2, o);
  c.Initialize({0, 1});
  c.SetChain(1, {0, 1});
  c.Push(0, 0, 0, 1.0f);
  EXPECT_TRUE(c.replies.empty()) << "acknowledged only with its window's update";
  EXPECT_TRUE(c.wire.empty()) << "no update yet, so no record";
  c.Push(0, 1, 0, 3.0f);
  EXPECT_TRUE(c.replies.empty());
  ASSERT_EQ(c.wire.size(), 1u);
  c.Run();
  ASSERT_EQ(c.replies.size(), 2u);
  for (const auto& r : c.replies) EXPECT_EQ(r.message.step, 1);
  EXPECT_FLOAT_EQ(c.at(1).store().Value("w")[0], 8.0f);  // 10 - mean(1, 3)
}

TEST(ReplicaChainTest, ASyncWindowsPushesAndPullsWaitForItsReplicatedUpdate) {
  Options o;
  o.mode = UpdateMode::kSync;
  Cluster c(2, o);
  c.Initialize({0, 1});
  c.SetChain(1, {0, 1});
  c.Push(0, 0, 0, 1.0f);
  Message pull;
  pull.type = MessageType::kPull;
  pull.request_id = 99;
  c.Send(0, 0, pull);  // behind its own push, in lockstep
  c.Push(0, 1, 0, 3.0f);
  EXPECT_TRUE(c.replies.empty()) << "the window's update is not on the backup yet";
  c.Run();
  ASSERT_EQ(c.replies.size(), 3u);
  for (const auto& r : c.replies) {
    EXPECT_EQ(r.message.type, MessageType::kOk);
    EXPECT_EQ(r.message.step, 1);
  }
  const auto& pulled =
      std::find_if(c.replies.begin(), c.replies.end(),
                   [](const Cluster::Answered& r) { return r.message.request_id == 99; });
  ASSERT_NE(pulled, c.replies.end());
  ASSERT_EQ(pulled->message.tensors.size(), 3u);
  EXPECT_FLOAT_EQ(pulled->message.tensors[2].tensor[0], 8.0f) << "the window's update";
}

TEST(ReplicaChainTest, APullReportsTheCommittedStepNotTheAppliedOne) {
  Cluster c(2, Options{});
  c.Initialize({0, 1});
  c.SetChain(1, {0, 1});
  c.Push(0, 0, 0, 1.0f);
  EXPECT_EQ(c.at(0).global_step(), 1);
  Message pulled = c.Pull(0, 1);
  EXPECT_EQ(pulled.type, MessageType::kOk) << "answered at once";
  EXPECT_EQ(pulled.step, 0) << "the update is not acknowledged yet";
  ASSERT_EQ(pulled.tensors.size(), 3u);
  EXPECT_EQ(pulled.tensors[2].name, "w");
  EXPECT_FLOAT_EQ(pulled.tensors[2].tensor[0], 9.0f) << "the values are the applied ones";
  c.Run();
  EXPECT_EQ(c.Pull(0, 1).step, 1);
}

TEST(ReplicaChainTest, ARetryToThePromotedBackupIsAnsweredNotAppliedTwice) {
  Cluster c(2, Options{});
  c.Initialize({0, 1});
  c.SetChain(1, {0, 1});
  // (a) committed, but the reply is lost.
  c.Push(0, 0, 0, 1.0f);
  c.Run();
  c.replies.clear();
  // (b) applied by the backup, but its acknowledgement is lost.
  c.Push(0, 1, 0, 2.0f);
  c.Step();
  c.Lose();
  // (c) never reached the backup.
  c.Push(0, 0, 1, 4.0f);  // worker 0's second push
  c.Lose();
  EXPECT_TRUE(c.replies.empty());
  EXPECT_EQ(c.at(1).global_step(), 2);
  // Task 0 dies; task 1 heads the shard alone.
  c.SetChain(2, {1});
  c.Retry(1, 1, 0, 2.0f);  // (b)
  ASSERT_EQ(c.replies.size(), 1u);
  EXPECT_EQ(c.replies.back().message.type, MessageType::kOk);
  EXPECT_EQ(c.at(1).global_step(), 2) << "(b) answered from the retry cache";
  c.Retry(1, 0, 1, 4.0f);  // (c)
  ASSERT_EQ(c.replies.size(), 2u);
  EXPECT_EQ(c.replies.back().message.type, MessageType::kOk);
  EXPECT_EQ(c.at(1).global_step(), 3) << "(c) applied afresh";
  // (a) is older than worker 0's last push: a retry of it is answered too, not applied.
  Message a = c.PushOf(0, 0, {{"w", Tensor::Filled(Shape{kW}, 1.0f)}}, true);
  a.sequence = 1;
  c.Send(1, 0, a);
  ASSERT_EQ(c.replies.size(), 3u);
  EXPECT_EQ(c.replies.back().message.type, MessageType::kOk);
  EXPECT_EQ(c.at(1).global_step(), 3);
  EXPECT_FLOAT_EQ(c.at(1).store().Value("w")[0], 10.0f - 1 - 2 - 4) << "each push once";
  EXPECT_EQ(c.replies.back().message.step, 3);
}

TEST(ReplicaChainTest, AStaleDropSurvivesFailoverSoTheNextPushDoesNotSkipAhead) {
  Options o;
  o.mode = UpdateMode::kAccumulate;
  o.accumulate_n = 1;
  o.max_staleness = 1;
  Cluster c(2, o);
  c.Initialize({0, 1});
  c.SetChain(1, {0, 1});
  for (int i = 0; i < 3; ++i) c.Push(0, 0, i, 1.0f);
  c.Push(0, 1, 0, 1.0f);  // from step 0 at step 3: dropped
  c.Run();
  ASSERT_EQ(c.replies.size(), 4u);
  EXPECT_EQ(c.replies.back().message.value, -1) << c.replies.back().message.text;
  c.replies.clear();
  c.SetChain(2, {1});
  c.Push(1, 1, 3, 1.0f);  // worker 1's second push, to the new head
  ASSERT_EQ(c.replies.size(), 1u);
  EXPECT_EQ(c.replies[0].message.type, MessageType::kOk) << c.replies[0].message.text;
  EXPECT_EQ(c.replies[0].message.value, 0);
  EXPECT_EQ(c.at(1).global_step(), 4);
}

TEST(ReplicaChainTest, ARecordFromAnOlderEpochIsRefused) {
  Cluster c(2, Options{});
  c.Initialize({0, 1});
  c.SetChain(1, {0, 1});
  c.SetChain(2, {1}, {}, {1});  // task 0 is thought dead, but is not told
  c.Push(0, 0, 0, 1.0f);        // the old head takes a push
  ASSERT_EQ(c.wire.size(), 1u);
  c.Step();
  ASSERT_EQ(c.wire.size(), 1u);
  const Message& refusal = c.wire.front().message;
  EXPECT_EQ(refusal.type, MessageType::kError);
  EXPECT_EQ(refusal.error_code, StatusCode::kAborted);
  EXPECT_NE(refusal.text.find("map epoch 1 is older than this shard's map epoch 2"),
            std::string::npos)
      << refusal.text;
  EXPECT_EQ(c.at(1).global_step(), 0) << "nothing applied";
  c.Run();
  EXPECT_TRUE(c.replies.empty()) << "the zombie acknowledges nothing";
}

TEST(ReplicaChainTest, ARecordOfAMapItsReceiverHasNotYetWaitsForIt) {
  Cluster c(3, Options{});
  c.Initialize({0, 1, 2});
  c.SetChain(1, {0, 1});
  c.SetChain(2, {0, 1}, {2}, {0});  // the head has the new map; its successor not yet
  c.Push(0, 0, 0, 1.0f);
  ASSERT_EQ(c.wire.size(), 1u);
  c.Step();
  EXPECT_TRUE(c.wire.empty()) << "neither applied nor refused";
  EXPECT_EQ(c.at(1).global_step(), 0);
  c.SetChain(2, {0, 1}, {2}, {1});
  EXPECT_EQ(c.at(1).global_step(), 1);
  c.Run();
  ASSERT_EQ(c.replies.size(), 1u);
  EXPECT_EQ(c.replies[0].message.type, MessageType::kOk);
  // A record of the older map from the same predecessor is still taken.
  c.SetChain(3, {0, 1}, {}, {1});
  c.Push(0, 0, 1, 1.0f);
  c.Run();
  EXPECT_EQ(c.at(1).global_step(), 2);
  EXPECT_EQ(c.replies.size(), 2u);
}

TEST(ReplicaChainTest, ARecordThatSkipsAStepIsRefusedNamingTheGap) {
  Cluster c(2, Options{});
  c.Initialize({0, 1});
  c.SetChain(1, {0, 1});
  c.Push(0, 0, 0, 1.0f);
  c.Lose();  // record 1
  c.Push(0, 1, 0, 1.0f);
  c.Step();  // record 2
  ASSERT_EQ(c.wire.size(), 1u);
  const Message& refusal = c.wire.front().message;
  EXPECT_EQ(refusal.type, MessageType::kError);
  EXPECT_NE(refusal.text.find("record 2 skips ahead"), std::string::npos) << refusal.text;
  EXPECT_NE(refusal.text.find("holds records up to 0 (expected record 1)"), std::string::npos)
      << refusal.text;
  EXPECT_EQ(c.at(1).global_step(), 0);
}

TEST(ReplicaChainTest, ARecordFromANonPredecessorIsRefused) {
  Cluster c(3, Options{});
  c.Initialize({0, 1, 2});
  c.SetChain(1, {0, 1, 2});
  c.Push(0, 0, 0, 1.0f);
  ASSERT_EQ(c.wire.size(), 1u);
  c.wire.front().to = 2;  // the head's record, straight to the tail
  c.Step();
  ASSERT_EQ(c.wire.size(), 1u);
  const Message& refusal = c.wire.front().message;
  EXPECT_EQ(refusal.error_code, StatusCode::kPermissionDenied);
  EXPECT_NE(refusal.text.find("from ps 0, which is not the predecessor of shard 0 at map epoch 1 "
                              "(task 1)"),
            std::string::npos)
      << refusal.text;
  EXPECT_EQ(c.at(2).global_step(), 0);
}

TEST(ReplicaChainTest, ARecordForAnotherShardOrACopyToAMemberIsRefused) {
  Cluster c(2, Options{});
  c.Initialize({0, 1});
  c.SetChain(1, {0, 1});
  c.Push(0, 0, 0, 1.0f);
  c.wire.front().message.shard = 3;
  c.Step();
  EXPECT_NE(c.wire.front().message.text.find("a replicate for shard 3 reached shard 0"),
            std::string::npos)
      << c.wire.front().message.text;
  c.wire.clear();
  Message copy;
  copy.type = MessageType::kReplicaCopy;
  copy.role = "ps";
  copy.task_index = 0;
  copy.incarnation = 1;
  copy.shard = 0;
  copy.map_epoch = 1;
  copy.sequence = 1;
  auto out = c.at(1).Handle("ps-0", copy, "ps-0");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NE(out[0].message.text.find("which is not joining it at map epoch 1"), std::string::npos)
      << out[0].message.text;
  EXPECT_EQ(c.at(1).global_step(), 0);
}

TEST(ReplicaChainTest, AMiddleThatDiesLeavesItsRecordsToBeSentAgainToTheTail) {
  Cluster c(3, Options{});
  c.Initialize({0, 1, 2});
  c.SetChain(1, {0, 1, 2});
  c.Push(0, 0, 0, 1.0f);
  c.Run();
  c.replies.clear();
  c.Push(0, 0, 1, 2.0f);  // record 2 reaches the tail; its acknowledgement to the middle is lost
  c.Step();
  c.Step();
  c.Lose();
  c.Push(0, 1, 1, 4.0f);  // record 3 reaches only the middle
  c.Step();
  c.Lose();
  EXPECT_EQ(c.at(2).global_step(), 2);
  EXPECT_TRUE(c.replies.empty());
  c.SetChain(2, {0, 2});  // the middle is gone
  EXPECT_EQ(c.wire.size(), 2u) << "records 2 and 3 again, to the new successor";
  c.Run();
  EXPECT_EQ(c.replies.size(), 2u);
  for (const auto& r : c.replies) EXPECT_EQ(r.message.type, MessageType::kOk);
  EXPECT_EQ(c.at(2).global_step(), 3) << "record 2 held already, record 3 applied";
  ExpectBitwiseEqual(c.at(0), c.at(2));
}

// With keys: the dead head's record still on its way down the chain is taken by its tag (the head
// of the epoch it was made under), the new head's records by the new head's, and a record the
// new head's successor receives altered is refused naming the head.
TEST(ReplicaChainTest, AfterAFailoverEachRecordIsCheckedAgainstTheHeadThatMadeIt) {
  Options o;
  o.keys_dir = ::testing::TempDir() + "/replica_chain_keys_" + std::to_string(getpid());
  std::filesystem::remove_all(o.keys_dir);
  ASSERT_TRUE(wire::WriteClusterKeys(o.keys_dir, 3, 2, 0).ok());
  Cluster c(3, o);
  c.Initialize({0, 1, 2});
  c.SetChain(1, {0, 1, 2});
  c.Push(0, 0, 0, 1.0f);
  c.Run();
  c.Push(0, 0, 1, 2.0f);
  c.Step();  // record 2 is with the middle, on its way to the tail
  ASSERT_EQ(c.wire.size(), 1u);
  c.SetChain(2, {1, 2}, {}, {1, 2});  // the head dies
  c.Run();
  EXPECT_EQ(c.at(2).global_step(), 2) << "the dead head's record was refused";
  c.Push(1, 1, 1, 4.0f);  // the new head's own record
  c.Run();
  EXPECT_EQ(c.at(2).global_step(), 3) << "the new head's record was refused";
  ExpectBitwiseEqual(c.at(1), c.at(2));
  for (const auto& r : c.replies) EXPECT_EQ(r.message.type, MessageType::kOk) << r.message.text;

  c.Push(1, 0, 2, 8.0f);
  ASSERT_EQ(c.wire.size(), 1u);
  Tensor altered = c.wire.front().message.tensors.at(0).tensor.Clone();
  altered.data()[0] += 1.0f;
  c.wire.front().message.tensors.at(0).tensor = altered;
  c.Step();
  ASSERT_EQ(c.wire.size(), 1u);
  const Message& refusal = c.wire.front().message;
  EXPECT_EQ(refusal.type, MessageType::kError);
  EXPECT_NE(refusal.text.find("record 4 of shard 0 (head: task 1) carries a tag for ps-2 that "),
            std::string::npos)
      << refusal.text;
  EXPECT_EQ(c.at(2).global_step(), 3);
  EXPECT_FLOAT_EQ(c.at(2).store().Value("w")[0], 10.0f - 1 - 2 - 4) << "the altered record moved w";
  std::filesystem::remove_all(o.keys_dir);
}

TEST(ReplicaChainTest, AMalformedRecordIsRefusedByNameAndChangesNothing) {
  Cluster c(2, Options{});
  c.Initialize({0, 1});
  c.SetChain(1, {0, 1});
  c.Push(0, 0, 0, 1.0f);
  ASSERT_EQ(c.wire.size(), 1u);
  const Message good = c.wire.front().message;
  c.wire.clear();
  const auto before = c.at(1).store().StateTensors();
  std::vector<float> w_before(before.at("w").data(), before.at("w").data() + kW);
  struct Case {
    void (*spoil)(Message*);
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](Message* m) { m->tensors[0].name = "nope"; }, "'nope'"},
      {[](Message* m) { m->tensors[0].tensor = Tensor::Filled(Shape{3}, 1.0f); }, "shape"},
      {[](Message* m) { m->tensors[0].tensor = Tensor::Filled(Shape{kW}, NAN); }, "'w'"},
      {[](Message* m) { m->tensors.push_back(m->tensors[0]); }, "two gradients of 'w'"},
      {[](Message* m) { m->step = -4; }, "applied at step -4"},
      {[](Message* m) { m->value = 7; }, "takes the shard to step 7 from step 0"},
      {[](Message* m) { m->pushes[0].sequence = 0; }, "retry-cache entry"},
      {[](Message* m) { m->pushes[0].role = "ps"; }, "expected a worker (or the chief)"},
      {[](Message* m) { m->map_epoch = 1000; }, "more than 16 ahead of this task's 1"},
  };
  for (const Case& k : cases) {
    Message bad = good;
    k.spoil(&bad);
    auto out = c.at(1).Handle("ps-0", bad, "ps-0");
    ASSERT_EQ(out.size(), 1u) << k.expected;
    EXPECT_EQ(out[0].message.type, MessageType::kError) << k.expected;
    EXPECT_NE(out[0].message.text.find(k.expected), std::string::npos) << out[0].message.text;
  }
  EXPECT_EQ(c.at(1).global_step(), 0);
  EXPECT_EQ(std::memcmp(w_before.data(), c.at(1).store().Value("w").data(), kW * sizeof(float)), 0);
  EXPECT_TRUE(c.at(1).peers().empty() || c.at(1).peers().count("worker 0") == 0)
      << "no retry-cache entry installed";
  auto out = c.at(1).Handle("ps-0", good, "ps-0");  // the record itself is still taken
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.type, MessageType::kOk);
  EXPECT_EQ(out[0].message.sequence, 1u);
}

// What a head takes decides what its records say: a push naming a variable twice, or sending as
// a gradient what was assigned before (or the reverse), would make a record its backups read
// otherwise (they tell assigns by name), so it is refused before anything changes.
TEST(ReplicaChainTest, APushABackupWouldReadOtherwiseIsRefusedAndChangesNothing) {
  Cluster c(2, Options{});
  c.Initialize({0, 1});
  c.SetChain(1, {0, 1});
  Message assign = c.PushOf(
      0, 0, {{"w", Tensor::Filled(Shape{kW}, 1.0f)}, {"bn", Tensor::Filled(Shape{4}, 2.0f)}});
  assign.assigns.push_back("bn");
  c.Send(0, 0, assign);
  c.Run();
  ASSERT_EQ(c.replies.size(), 1u);
  ASSERT_EQ(c.replies[0].message.type, MessageType::kOk) << c.replies[0].message.text;
  c.replies.clear();
  const int64_t step = c.at(0).global_step();
  // Each refused push is followed by the next with the next sequence number (a refused push is
  // not applied, so the sender's next push must not look like a skip: it reuses the number).
  using Tensors = std::vector<std::pair<std::string, Tensor>>;
  const std::vector<std::pair<Tensors, std::string>> cases = {
      {{{"w", Tensor::Filled(Shape{kW}, 1.0f)}, {"w", Tensor::Filled(Shape{kW}, 1.0f)}},
       "names variable 'w' twice"},
      {{{"bn", Tensor::Filled(Shape{4}, 1.0f)}},
       "variable 'bn' was pushed as a value to assign before"},
  };
  bool first = true;
  for (const auto& [tensors, expected] : cases) {
    c.Send(0, 0, c.PushOf(0, step, tensors, /*retry=*/!first));  // push 2 each time
    first = false;
    ASSERT_EQ(c.replies.size(), 1u) << expected;
    EXPECT_EQ(c.replies[0].message.type, MessageType::kError) << expected;
    EXPECT_NE(c.replies[0].message.text.find(expected), std::string::npos)
        << c.replies[0].message.text;
    c.replies.clear();
    EXPECT_TRUE(c.wire.empty()) << "no record for a refused push";
    EXPECT_EQ(c.at(0).global_step(), step);
  }
  ExpectBitwiseEqual(c.at(0), c.at(1));
}

TEST(ReplicaChainTest, ACopyBeyondExactStepsIsRefusedAndChangesNothing) {
  Cluster c(2, Options{});
  c.Initialize({0});
  c.SetChain(1, {0}, {1});
  ASSERT_EQ(c.wire.size(), 1u);
  c.wire.front().message.value = int64_t{1} << 60;
  c.Step();
  ASSERT_EQ(c.wire.size(), 1u);
  EXPECT_NE(c.wire.front().message.text.find("both are from 0 to 2^53"), std::string::npos)
      << c.wire.front().message.text;
  EXPECT_FALSE(c.at(1).initialized());
}

TEST(ReplicaChainTest, AMalformedCopyIsRefusedAndChangesNothing) {
  Options o;
  o.config = kAdamClipped;
  Cluster c(2, o);
  c.Initialize({0});
  c.SetChain(1, {0}, {1});
  ASSERT_EQ(c.wire.size(), 1u);
  Message& copy = c.wire.front().message;
  copy.tensors.erase(std::remove_if(copy.tensors.begin(), copy.tensors.end(),
                                    [](const wire::NamedTensor& t) { return t.name == "w/v"; }),
                     copy.tensors.end());
  c.Step();
  ASSERT_EQ(c.wire.size(), 1u);
  EXPECT_NE(c.wire.front().message.text.find("the copy lacks slot 'w/v'"), std::string::npos)
      << c.wire.front().message.text;
  EXPECT_FALSE(c.at(1).initialized());
  EXPECT_TRUE(c.at(1).store().Names().empty());
}

TEST(ReplicaChainTest, AJoiningTailCopiesWhileUpdatesContinueAndEndsEqual) {
  Options o;
  o.config = kAdamClipped;
  Cluster c(2, o);
  c.Initialize({0});
  c.SetChain(1, {0}, {}, {0});
  for (int i = 0; i < 20; ++i) c.Push(0, i % 2, i, 0.1f * i);
  EXPECT_EQ(c.replies.size(), 20u) << "a head alone commits at once";
  c.replies.clear();
  c.SetChain(2, {0}, {1});
  ASSERT_EQ(c.wire.size(), 1u);
  EXPECT_EQ(c.wire.front().message.type, MessageType::kReplicaCopy);
  EXPECT_FALSE(c.at(1).initialized());
  // 50 updates while the copy is on its way: the copy keeps the bytes it was taken with.
  std::mt19937 rng(3);
  for (int i = 0; i < 50; ++i) c.Push(0, i % 2, 20 + i, static_cast<float>(rng() % 100) / 50);
  EXPECT_EQ(c.replies.size(), 50u) << "committed without the joiner until it has caught up";
  EXPECT_EQ(c.wire.size(), 51u);
  EXPECT_TRUE(c.at(0).CaughtUpJoiners().empty());
  c.Run();
  EXPECT_TRUE(c.at(1).initialized());
  ExpectBitwiseEqual(c.at(0), c.at(1));
  EXPECT_EQ(c.at(0).CaughtUpJoiners(), std::vector<int>{1});
  // Caught up: the tail now waits for it.
  c.replies.clear();
  c.Push(0, 0, 70, 1.0f);
  EXPECT_TRUE(c.replies.empty());
  c.Run();
  EXPECT_EQ(c.replies.size(), 1u);
  // Made a member by the next map, it simply continues, and may become the head.
  c.SetChain(3, {0, 1});
  c.Push(0, 1, 71, 1.0f);
  c.Run();
  ExpectBitwiseEqual(c.at(0), c.at(1));
  c.SetChain(4, {1}, {}, {1});
  c.replies.clear();
  c.Retry(1, 1, 71, 1.0f);
  ASSERT_EQ(c.replies.size(), 1u);
  EXPECT_EQ(c.replies[0].message.type, MessageType::kOk);
  EXPECT_EQ(c.at(1).global_step(), c.at(0).global_step()) << "the retry is not applied again";
}

TEST(ReplicaChainTest, AJoinerThatNeverGotItsCopyIsCopiedAgainAtMostOnceASecond) {
  Cluster c(2, Options{});
  c.Initialize({0});
  c.SetChain(1, {0}, {1});
  ASSERT_EQ(c.wire.size(), 1u);
  c.Lose();  // the copy, to a process that then restarted
  c.Push(0, 0, 0, 1.0f);
  c.Run();  // record 1 refused at once: no copy; too soon to copy again
  EXPECT_EQ(c.at(0).stats().copies_sent, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  for (int i = 1; i < 4; ++i) c.Push(0, 0, i, 1.0f);
  EXPECT_EQ(c.replies.size(), 4u) << "committed without the joiner";
  c.Run();  // record 2's refusal sends a copy; those of records 3 and 4 none
  EXPECT_EQ(c.at(0).stats().copies_sent, 2);
  EXPECT_TRUE(c.at(1).initialized());
  ExpectBitwiseEqual(c.at(0), c.at(1));
  EXPECT_TRUE(c.at(0).CaughtUpJoiners().empty()) << "caught up before a stamp verified its copy";
  c.Tick(0, std::chrono::steady_clock::now() + std::chrono::seconds(2));  // the idle shard's stamp
  c.Run();
  EXPECT_EQ(c.at(0).CaughtUpJoiners(), std::vector<int>{1});
}

TEST(ReplicaChainTest, AJoinerWithAnotherTrainConfigIsRefusedByName) {
  Cluster c(2, Options{});
  c.Replace(1, c.Make(1, "{optimizer: {type: sgd}, learning_rate: {initial: 0.5}}"));
  c.Initialize({0});
  c.SetChain(1, {0}, {1});
  ASSERT_EQ(c.wire.size(), 1u);
  c.Step();
  ASSERT_EQ(c.wire.size(), 1u);
  const Message refusal = c.wire.front().message;
  EXPECT_EQ(refusal.type, MessageType::kError);
  EXPECT_NE(refusal.text.find("another train config"), std::string::npos) << refusal.text;
  EXPECT_NE(refusal.text.find("initial: 0.5"), std::string::npos) << refusal.text;
  EXPECT_FALSE(c.at(1).initialized());
  c.Run();
  c.Push(0, 0, 0, 1.0f);
  EXPECT_TRUE(c.wire.empty()) << "no records to a joiner that refused its copy";
  EXPECT_EQ(c.replies.size(), 1u);
  EXPECT_TRUE(c.at(0).CaughtUpJoiners().empty());
}

// An idle shard's joiner: its copy's acknowledgement alone does not make it caught up; the
// head, with a joiner listed and nothing to record, makes a record of no update to carry its
// stamp, at most once a second, and the joiner verified by it is caught up.
TEST(ReplicaChainTest, AJoinerOfAnIdleShardIsCaughtUpOnlyOnceTheHeadsStampVerifiesItsCopy) {
  Options o;
  o.config = kAdamClipped;
  Cluster c(2, o);
  c.Initialize({0});
  c.SetChain(1, {0}, {}, {0});
  for (int i = 0; i < 5; ++i) c.Push(0, i % 2, i, 0.5f);
  const auto now = std::chrono::steady_clock::now();
  c.Tick(0, now);
  EXPECT_TRUE(c.wire.empty()) << "a stamp with no joiner listed";
  c.SetChain(2, {0}, {1});
  c.Run();
  ASSERT_TRUE(c.at(1).initialized());
  EXPECT_TRUE(c.at(0).CaughtUpJoiners().empty()) << "caught up by its copy alone";
  c.Tick(0, now);
  ASSERT_EQ(c.wire.size(), 1u);
  EXPECT_EQ(c.wire.front().message.state_digest.size(), wire::kStateDigestBytes);
  EXPECT_TRUE(c.wire.front().message.tensors.empty());
  c.Run();
  EXPECT_EQ(c.at(0).CaughtUpJoiners(), std::vector<int>{1});
  ExpectBitwiseEqual(c.at(0), c.at(1));
  c.Tick(0, now + std::chrono::milliseconds(900));
  EXPECT_TRUE(c.wire.empty()) << "a second stamp within a second";
}

// In accumulate mode a push's assigned values are applied on the head when it arrives but ride
// in its window's record: the head stamps no record while a window is open, so an honest copy
// is never taken for a forged one.
TEST(ReplicaChainTest, AnOpenWindowDefersTheStampUntilItsRecord) {
  Options o;
  o.mode = UpdateMode::kAccumulate;
  o.accumulate_n = 2;
  Cluster c(2, o);
  c.Initialize({0});
  c.SetChain(1, {0}, {1});
  c.Run();
  ASSERT_TRUE(c.at(1).initialized());
  Message m = c.PushOf(
      0, 0, {{"w", Tensor::Filled(Shape{kW}, 1.0f)}, {"bn", Tensor::Filled(Shape{4}, 3.0f)}});
  m.assigns = {"bn"};
  c.Send(0, 0, m);
  c.Tick(0, std::chrono::steady_clock::now());
  EXPECT_TRUE(c.wire.empty()) << "a stamp while the window is open";
  c.Push(0, 1, 0, 2.0f);  // the window's record, stamped
  ASSERT_EQ(c.wire.size(), 1u);
  EXPECT_FALSE(c.wire.front().message.state_digest.empty());
  c.Run();
  EXPECT_TRUE(c.at(1).initialized()) << "an honest copy was dropped";
  EXPECT_EQ(c.at(0).CaughtUpJoiners(), std::vector<int>{1});
  ExpectBitwiseEqual(c.at(0), c.at(1));
}

// A copy altered on its way (what a tail's key could send): the joiner installs it, finds it
// unlike the head's state at the first stamped record, drops it and refuses records until the
// tail copies it again; the new copy is verified and the joiner ends equal to its head.
TEST(ReplicaChainTest, ACopyAlteredOnTheWayIsDroppedAtTheHeadsNextStampAndCopiedAgain) {
  Cluster c(2, Options{});
  c.Initialize({0});
  c.SetChain(1, {0}, {1});
  ASSERT_EQ(c.wire.size(), 1u);
  Message& copy = c.wire.front().message;
  ASSERT_EQ(copy.type, MessageType::kReplicaCopy);
  for (auto& t : copy.tensors) {
    if (t.name == "b") t.tensor = Tensor::Filled(t.tensor.shape(), 5.0f);  // the head's: -1
  }
  c.Run();
  ASSERT_TRUE(c.at(1).initialized()) << "nothing tells an altered copy apart before a stamp";
  c.Push(0, 0, 0, 1.0f);  // record 1, stamped: the first since the joiner was listed
  c.Run();
  EXPECT_FALSE(c.at(1).initialized()) << "the altered copy was kept";
  EXPECT_EQ(c.at(1).stats().rejected, 1);
  EXPECT_TRUE(c.at(0).CaughtUpJoiners().empty());
  EXPECT_EQ(c.at(0).stats().copies_sent, 1) << "copied again at most once a second";
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  c.Push(0, 0, 1, 1.0f);  // record 2, refused for want of a copy: a new one goes
  c.Run();
  EXPECT_EQ(c.at(0).stats().copies_sent, 2);
  ASSERT_TRUE(c.at(1).initialized());
  ExpectBitwiseEqual(c.at(0), c.at(1));
  c.Tick(0, std::chrono::steady_clock::now() + std::chrono::seconds(2));
  c.Run();
  EXPECT_TRUE(c.at(1).initialized()) << "the honest copy was dropped";
  EXPECT_EQ(c.at(0).CaughtUpJoiners(), std::vector<int>{1});
}

TEST(ReplicaChainTest, AHeadThatLosesItsPlaceAnswersHeldRepliesAborted) {
  Options o;
  o.mode = UpdateMode::kAccumulate;
  o.accumulate_n = 2;
  Cluster c(2, o);
  c.Initialize({0, 1});
  c.SetChain(1, {0, 1});
  c.Push(0, 0, 0, 1.0f);
  c.Push(0, 1, 0, 1.0f);  // the window's record: unacknowledged
  c.Push(0, 0, 1, 1.0f);  // the next window, open
  c.wire.clear();
  EXPECT_TRUE(c.replies.empty());
  c.SetChain(2, {1, 0});  // a head is never handed back, but here it is: the old one must let go
  ASSERT_EQ(c.replies.size(), 3u);
  for (const auto& r : c.replies) {
    EXPECT_EQ(r.message.error_code, StatusCode::kAborted);
    EXPECT_NE(r.message.text.find("not the head of shard 0 at map epoch 2 (head: task 1)"),
              std::string::npos)
        << r.message.text;
  }
  c.replies.clear();
  c.Push(0, 0, 1, 1.0f);
  ASSERT_EQ(c.replies.size(), 1u);
  EXPECT_EQ(c.replies[0].message.error_code, StatusCode::kAborted) << "a backup takes no pushes";
}

TEST(ReplicaChainTest, WithoutAMapNothingIsHeldAndNothingIsSent) {
  Cluster c(1, Options{});
  c.Initialize({0});
  c.Push(0, 0, 0, 1.0f);
  EXPECT_TRUE(c.wire.empty());
  ASSERT_EQ(c.replies.size(), 1u);
  EXPECT_EQ(c.replies[0].message.step, 1);
  EXPECT_EQ(c.replies[0].message.map_epoch, 0u);
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
