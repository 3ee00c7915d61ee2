// Intra-node sync against a real parameter-server process: two workers of one host, as rank
// threads over the CPU collectives, average their gradients; only the leader pushes (once) and
// pulls, and both ranks end with the servers' values. NCCL runs the same code on GPUs.
#include "worker/distributed/host_sync.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>

#include "tests/captured_log.h"
#include "tests/collectives/rank_threads.h"
#include "tests/distributed/ports.h"
#include "tests/distributed/role_process.h"
#include "tests/distributed/sgd_variables.h"
#include "worker/distributed/collectives/zmq_store.h"
#include "worker/distributed/intra_node.h"

namespace pstrain {
namespace worker {
namespace {

using Variables = testing::SgdVariables;

TEST(HostGroupTest, WorkersOnOneHostFormAGroupLedByTheLowestTask) {
  const std::vector<std::string> hosts{"10.0.0.1:2232", "10.0.0.2:2232", "10.0.0.1:2233",
                                       "10.0.0.1:2234"};
  HostGroup g = HostGroupOf(hosts, 2).value();
  EXPECT_EQ(g.host, "10.0.0.1");
  EXPECT_EQ(g.tasks, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(g.local_rank, 1);
  EXPECT_EQ(g.leader(), 0);
  EXPECT_FALSE(g.is_leader());
  HostGroup alone = HostGroupOf(hosts, 1).value();
  EXPECT_EQ(alone.size(), 1);
  EXPECT_TRUE(alone.is_leader());
  EXPECT_FALSE(HostGroupOf(hosts, 4).ok());
  EXPECT_FALSE(HostGroupOf({"nohost"}, 0).ok());
}

// Both CPU transports: ranks as threads, and ranks meeting at a host hub over loopback TCP as
// worker processes do.
class HostSyncTest : public ::testing::TestWithParam<RankTransport> {
 protected:
  void SetUp() override {
    port_ = testing::PickPort();
    dir_ = ::testing::TempDir() + "/host_sync_" + std::to_string(port_);
    std::filesystem::remove_all(dir_);
    pid_ = testing::SpawnProcess(testing::SingleServerArgs(port_, dir_));
  }
  void TearDown() override { testing::KillProcess(&pid_); }
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  // The leader's (rank 0's) client, having initialised the server; null on the other ranks.
  Result<std::unique_ptr<PsClient>> LeaderClient(const Collectives& c, Variables& mine) const {
    if (c.rank() != 0) return std::unique_ptr<PsClient>();
    ASSIGN_OR_RETURN(auto client, PsClient::Connect({host()}, "chief", 0, mine.all(), 8 << 20));
    RETURN_IF_ERROR(client->Initialize(0).status());
    return client;
  }

  int port_ = 0;
  pid_t pid_ = -1;
  std::string dir_;
};

TEST_P(HostSyncTest, TheHostPushesItsAverageOnceAndEveryRankGetsTheNewValues) {
  Variables vars[2];
  std::vector<int64_t> steps(2, -1);
  std::vector<Status> statuses = RunRanks(
      2,
      [&](Collectives& c) -> Status {
        Variables& mine = vars[c.rank()];
        ASSIGN_OR_RETURN(std::unique_ptr<PsClient> client, LeaderClient(c, mine));
        HostSync sync(&c, HostTensorsOf(mine.all()));
        ASSIGN_OR_RETURN(int64_t step, sync.Pull([&] { return client->Pull(); }));
        // Rank 0's gradients are 1, rank 1's are 3: the host pushes their mean, 2.
        mine.weights.grad.Fill(c.rank() == 0 ? 1.0f : 3.0f);
        mine.bias.grad.Fill(c.rank() == 0 ? 1.0f : 3.0f);
        ASSIGN_OR_RETURN(PushPullResult r,
                         sync.PushAndPull([&] { return client->PushAndPull(step); }));
        steps[c.rank()] = r.global_step;
        return Status::OK();
      },
      GetParam());
  for (const Status& s : statuses) ASSERT_TRUE(s.ok()) << s.ToString();
  for (int r = 0; r < 2; ++r) {
    EXPECT_FLOAT_EQ(vars[r].weights.value[0], 1.0f - 2.0f) << "rank " << r;
    EXPECT_FLOAT_EQ(vars[r].bias.value[1], 0.5f - 2.0f) << "rank " << r;
    EXPECT_EQ(steps[r], 1) << "one push for the host: one update";
  }
}

TEST_P(HostSyncTest, WhenTheLeadersExchangeFailsEveryRankFailsInsteadOfWaiting) {
  Variables vars[2];
  std::vector<Status> statuses = RunRanks(
      2,
      [&](Collectives& c) -> Status {
        Variables& mine = vars[c.rank()];
        ASSIGN_OR_RETURN(std::unique_ptr<PsClient> client, LeaderClient(c, mine));
        if (client) client->set_unavailable_timeout(std::chrono::seconds(1));
        HostSync sync(&c, HostTensorsOf(mine.all()));
        RETURN_IF_ERROR(sync.Pull([&] { return client->Pull(); }).status());
        if (c.rank() == 0) testing::KillProcess(&pid_);
        return sync.PushAndPull([&] { return client->PushAndPull(0); }).status();
      },
      GetParam());
  ASSERT_FALSE(statuses[0].ok());
  EXPECT_NE(statuses[0].message().find("ps 0"), std::string::npos) << statuses[0].ToString();
  ASSERT_FALSE(statuses[1].ok());
  EXPECT_NE(statuses[1].message().find("the host's leader"), std::string::npos)
      << statuses[1].ToString();
}

// Overlap with backward needs no server: the leader's exchange is a stand-in that checks what
// it would push.
class HostSyncOverlapTest : public ::testing::TestWithParam<RankTransport> {};

// One rank's tensors in the overlap tests, of sizes in backward order: its gradients twice (one
// copy averaged with overlap, one after backward, as the reference) and its values.
struct RankTensors {
  static constexpr int kRanks = 3;
  std::vector<int64_t> sizes = {300, 7, 64, 1, 129, 40, 2};
  std::vector<Tensor> overlapped, after, values;

  void Fill(int r) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::vector<float> v(sizes[i]);
      for (int64_t k = 0; k < sizes[i]; ++k) v[k] = 0.37f * (r + 1) * (k + 1) + 0.01f * i;
      overlapped.push_back(Tensor::FromVector(Shape{sizes[i]}, v));
      after.push_back(Tensor::FromVector(Shape{sizes[i]}, v));
      values.push_back(Tensor::Filled(Shape{sizes[i]}, static_cast<float>(r)));
    }
  }
  SyncTensors Of(std::vector<Tensor>& averaged) {
    SyncTensors t;
    for (size_t i = 0; i < sizes.size(); ++i) {
      t.averaged.push_back(&averaged[i]);
      t.shared.push_back(&values[i]);
    }
    return t;
  }
  // The reference: `after` averaged over the ranks after backward.
  Status AverageAfter(Collectives& c, const BucketOptions& buckets) {
    HostSync plain(&c, Of(after), buckets);
    return plain.PushAndPull([] { return PushPullResult{}; }).status();
  }
};

TEST_P(HostSyncOverlapTest, BucketsAverageDuringBackwardAndMatchTheAverageAfterIt) {
  const int ranks = RankTensors::kRanks;
  std::vector<RankTensors> t(ranks);
  const std::vector<int64_t>& sizes = t[0].sizes;
  std::vector<int> started_early(ranks, 0);
  std::vector<Status> statuses = RunRanks(
      ranks,
      [&](Collectives& c) -> Status {
        const int r = c.rank();
        t[r].Fill(r);
        BucketOptions small{512};  // several buckets
        RETURN_IF_ERROR(t[r].AverageAfter(c, small));

        HostSync sync(&c, t[r].Of(t[r].overlapped), small);
        std::atomic<bool> first_bucket_started{false};
        sync.StartBackward();
        // "Backward" finishes the first tensors; their bucket must start before the step ends.
        sync.Ready(&t[r].overlapped[0], [&] {
          first_bucket_started = true;
          return Status::OK();
        });
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!first_bucket_started && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        started_early[r] = first_bucket_started ? 1 : 0;
        for (size_t i = 1; i + 1 < sizes.size(); ++i) sync.Ready(&t[r].overlapped[i]);
        // The last tensor is never marked (a layer backward skipped): PushAndPull averages it.
        ASSIGN_OR_RETURN(PushPullResult result, sync.PushAndPull([&] {
          for (size_t i = 0; i < sizes.size(); ++i) {
            EXPECT_EQ(t[r].overlapped[i].ToVector(), t[r].after[i].ToVector())
                << "the leader pushes the full average; tensor " << i;
          }
          PushPullResult p;
          p.global_step = 42;
          return p;
        }));
        EXPECT_EQ(result.global_step, 42);
        return Status::OK();
      },
      GetParam());
  for (const Status& s : statuses) ASSERT_TRUE(s.ok()) << s.ToString();
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(started_early[r], 1) << "rank " << r << ": the first bucket waited for the step";
    for (size_t i = 0; i < sizes.size(); ++i) {
      EXPECT_EQ(t[r].overlapped[i].ToVector(), t[0].after[i].ToVector())
          << "rank " << r << " tensor " << i << ": overlap must not change the average";
      EXPECT_EQ(t[r].values[i].ToVector(), t[0].values[i].ToVector()) << "the leader's values";
    }
  }
}

// The leader's overlapped push: each tensor is handed to it once, already averaged over every
// rank, in backward order, and the first while "backward" is still going on.
TEST_P(HostSyncOverlapTest, TheLeaderGetsEachTensorOnceAveragedWhileBackwardGoesOn) {
  const int ranks = RankTensors::kRanks;
  std::vector<RankTensors> t(ranks);
  const std::vector<int64_t>& sizes = t[0].sizes;
  std::vector<int> order;                  // the leader's hand-overs, by tensor index
  std::vector<std::vector<float>> handed;  // what each held when handed over
  std::mutex seen;
  std::vector<int> early(ranks, 0);
  std::vector<Status> statuses = RunRanks(
      ranks,
      [&](Collectives& c) -> Status {
        const int r = c.rank();
        t[r].Fill(r);
        BucketOptions small{512};
        RETURN_IF_ERROR(t[r].AverageAfter(c, small));

        HostSync sync(&c, t[r].Of(t[r].overlapped), small);
        if (r == 0) {
          sync.set_on_averaged([&](const Tensor* averaged) {
            std::lock_guard<std::mutex> lock(seen);
            for (size_t i = 0; i < sizes.size(); ++i) {
              if (averaged == &t[0].overlapped[i]) order.push_back(static_cast<int>(i));
            }
            handed.push_back(averaged->ToVector());
          });
        }
        sync.StartBackward();
        sync.Ready(&t[r].overlapped[0]);
        // The first bucket reaches the leader before the rest of "backward" has run.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (r == 0 && std::chrono::steady_clock::now() < deadline) {
          {
            std::lock_guard<std::mutex> lock(seen);
            if (!order.empty()) break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        {
          std::lock_guard<std::mutex> lock(seen);
          early[r] = r != 0 || !order.empty();
        }
        for (size_t i = 1; i < sizes.size(); ++i) sync.Ready(&t[r].overlapped[i]);
        return sync.PushAndPull([] { return PushPullResult{}; }).status();
      },
      GetParam());
  for (const Status& s : statuses) ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(early[0], 1) << "the leader got the first bucket only after backward";
  ASSERT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6})) << "each tensor once, in order";
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(handed[i], t[0].after[i].ToVector()) << "tensor " << i << " handed over unaveraged";
  }
}

// Joining a host's group as worker processes do (threads here, over the same sockets).
// With `keys_dir`, over CURVE with the cluster's keys (WriteClusterKeys' layout), as the
// launcher starts every cluster.
std::vector<Result<std::unique_ptr<IntraNodeGroup>>> JoinTwo(const std::string& model0,
                                                             const std::string& model1,
                                                             const std::string& keys_dir = "") {
  const std::vector<std::string> hosts{"127.0.0.1:" + std::to_string(testing::PickPort()),
                                       "127.0.0.1:" + std::to_string(testing::PickPort())};
  std::vector<Result<std::unique_ptr<IntraNodeGroup>>> joined;
  for (int task = 0; task < 2; ++task) joined.emplace_back(Internal("unset"));
  std::vector<std::thread> threads;
  for (int task = 0; task < 2; ++task) {
    threads.emplace_back([&, task] {
      IntraNodeOptions o;
      o.mode = IntraNodeSync::kCpu;
      o.worker_hosts = hosts;
      o.task_index = task;
      o.model = task == 0 ? model0 : model1;
      o.timeout = std::chrono::seconds(20);
      if (!keys_dir.empty()) {
        auto keys =
            wire::LoadClusterKeys(keys_dir + "/worker-" + std::to_string(task), "worker", task);
        ASSERT_TRUE(keys.ok()) << keys.status().ToString();
        o.curve = std::move(keys).value();
      }
      joined[task] = JoinIntraNodeGroup(o, "worker " + std::to_string(task));
    });
  }
  for (auto& t : threads) t.join();
  return joined;
}

// Both ranks of a joined group average {1, 2} and {3, 6} into {2, 4}.
void ExpectBothAverage(std::vector<Result<std::unique_ptr<IntraNodeGroup>>>& joined) {
  std::vector<std::vector<float>> data{{1, 2}, {3, 6}};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      EXPECT_TRUE(joined[r].value()->collectives->AllReduceAverage(data[r].data(), 2).ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(data[0], (std::vector<float>{2, 4}));
  EXPECT_EQ(data[1], (std::vector<float>{2, 4}));
}

TEST(IntraNodeGroupTest, WorkersOfOneHostJoinAndAverageThroughTheLeadersHub) {
  auto joined = JoinTwo("refnet, 2 variables, 10 floats", "refnet, 2 variables, 10 floats");
  for (auto& j : joined) ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_NE(joined[0].value()->hub, nullptr) << "task 0 leads and serves the hub";
  EXPECT_EQ(joined[1].value()->hub, nullptr);
  ExpectBothAverage(joined);
}

TEST(IntraNodeGroupTest, WorkersOfOneHostAverageThroughTheHubOverCurve) {
  // The leader is a client of its own hub too: it must connect with its own key pair and trust
  // its own public key (it once reused the hub's server settings, which have no server key).
  const std::string dir = ::testing::TempDir() + "/hub_curve_keys_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(wire::WriteClusterKeys(dir, /*ps=*/1, /*workers=*/2, /*evaluators=*/0).ok());
  testing::CapturedLog log;
  auto joined = JoinTwo("refnet, 2 variables, 10 floats", "refnet, 2 variables, 10 floats", dir);
  for (auto& j : joined) ASSERT_TRUE(j.ok()) << j.status().ToString();
  ExpectBothAverage(joined);
  // Both ranks are on this host: each proved its key on the hub's Unix socket beside the
  // leader's keys (common/wire/same_host.h), not over CURVE.
  for (const char* rank : {"accepted worker-0 ", "accepted worker-1 "}) {
    const std::string socket =
        std::filesystem::path(dir + "/worker-0/hub.sock").lexically_normal().string();
    EXPECT_NE(log.Find({rank, "on ipc://" + socket + " (key proved, same host)"}), "") << log.All();
  }
  EXPECT_EQ(log.Find({"(CURVE)"}), "") << "no rank went over CURVE";
  std::filesystem::remove_all(dir);
}

TEST(IntraNodeGroupTest, WorkersWithDifferentModelsStopAtStartSayingWhy) {
  auto joined =
      JoinTwo("refnet, 2 variables, 10 floats", "resnet50, 161 variables, 25557032 floats");
  for (auto& j : joined) {
    ASSERT_FALSE(j.ok());
    EXPECT_EQ(j.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(j.status().message().find("disagree"), std::string::npos) << j.status().message();
  }
}

TEST(IntraNodeGroupTest, TheLeaderKeepsItsHubUpUntilARankThatDisagreesHasReadWhy) {
  // A rank slower than the leader (a loaded host) reads the leader's mode after the leader has
  // found the disagreement; the leader once closed its hub at once, and that rank timed out
  // asking "is the host's leader up?" instead of hearing why.
  const std::vector<std::string> hosts{"127.0.0.1:" + std::to_string(testing::PickPort()),
                                       "127.0.0.1:" + std::to_string(testing::PickPort())};
  Result<std::unique_ptr<IntraNodeGroup>> leader = Internal("unset");
  std::thread lead([&] {
    IntraNodeOptions o;
    o.mode = IntraNodeSync::kCpu;
    o.worker_hosts = hosts;
    o.task_index = 0;
    o.model = "refnet, 2 variables, 10 floats";
    o.timeout = std::chrono::seconds(20);
    leader = JoinIntraNodeGroup(o, "worker 0");
  });
  auto store = ZmqStore::Connect(wire::TcpEndpoint(hosts[0]), /*rank=*/1);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->Set("mode/1", "cpu on cpu with resnet50, 161 variables").ok());
  std::this_thread::sleep_for(std::chrono::seconds(1));
  Result<std::string> theirs = (*store)->Get("mode/0", std::chrono::seconds(5));
  ASSERT_TRUE(theirs.ok()) << theirs.status().ToString();
  EXPECT_EQ(*theirs, "cpu on cpu with refnet, 2 variables, 10 floats");
  ASSERT_TRUE((*store)->Set("read/1", "1").ok());
  lead.join();
  ASSERT_FALSE(leader.ok());
  EXPECT_EQ(leader.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(leader.status().message().find("disagree"), std::string::npos)
      << leader.status().message();
}

TEST(IntraNodeGroupTest, ALoneWorkerHasNothingToSyncEvenWithNcclOnTheCpu) {
  IntraNodeOptions o;
  o.mode = IntraNodeSync::kNccl;
  o.worker_hosts = {"10.0.0.1:2232", "10.0.0.2:2232"};
  o.task_index = 1;
  o.device = Device::kCpu;
  auto joined = JoinIntraNodeGroup(o, "worker 1");
  ASSERT_TRUE(joined.ok()) << joined.status().ToString();
  EXPECT_EQ(joined.value(), nullptr);
  o.worker_hosts = {"10.0.0.1:2232", "10.0.0.1:2233"};  // sharing a host, but on the CPU
  auto refused = JoinIntraNodeGroup(o, "worker 1");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("needs a worker on a GPU"), std::string::npos)
      << refused.status().message();
}

INSTANTIATE_TEST_SUITE_P(Transports, HostSyncOverlapTest,
                         ::testing::Values(RankTransport::kThreads, RankTransport::kHub),
                         [](const auto& info) { return TransportName(info.param); });

INSTANTIATE_TEST_SUITE_P(Transports, HostSyncTest,
                         ::testing::Values(RankTransport::kThreads, RankTransport::kHub),
                         [](const auto& info) { return TransportName(info.param); });

}  // namespace
}  // namespace worker
}  // namespace pstrain
