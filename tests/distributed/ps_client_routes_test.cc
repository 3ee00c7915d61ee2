// PsClient's routing by shard (--replicas > 0) against in-process fake servers: a ServerSocket
// each, on a thread, answering as the test says. What a real server does with the requests is
// tests/ps/'s business; here only where they go and what they carry.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "common/wire/map_proof.h"
#include "common/wire/pair_tag.h"
#include "common/wire/shard_map_message.h"
#include "common/wire/transport.h"
#include "tests/distributed/fake_server.h"
#include "tests/distributed/sgd_variables.h"
#include "worker/distributed/ps_client.h"
#include "worker/distributed/shard_master.h"

namespace pstrain {
namespace {

using std::chrono::milliseconds;
using testing::ConnectTo;
using testing::FakeServer;
using testing::Ok;
using wire::Message;
using wire::MessageType;

Message NotTheHead(const Message& request, uint64_t epoch) {
  Message r =
      wire::ErrorReply(request, Aborted("not the head of shard " + std::to_string(request.shard)));
  r.incarnation = 7;
  r.map_epoch = epoch;
  return r;
}

Message MapReply(const Message& request, uint64_t epoch, std::vector<wire::Chain> chains) {
  Message r = Ok(request, epoch);
  r.chains = std::move(chains);
  return r;
}

TEST(PsClientRoutesTest, AnExchangeResendsToTheNewHeadWhenTheMapChanges) {
  // Epoch 2: task 0 left; task 1 heads both shards.
  const std::vector<wire::Chain> moved = {{0, {1}, {}}, {1, {1}, {}}};
  FakeServer old_head([&](const Message& m) -> std::optional<Message> {
    if (m.type == MessageType::kShardMap) return MapReply(m, 2, moved);
    if (m.type == MessageType::kHeartbeat) return Ok(m, 2);
    return NotTheHead(m, 2);
  });
  FakeServer new_head([&](const Message& m) -> std::optional<Message> {
    if (m.type == MessageType::kShardMap) return MapReply(m, 2, moved);
    return Ok(m, 2, m.shard == 0 ? 5 : 0);
  });
  testing::SgdVariables vars;
  auto client = ConnectTo({&old_head, &new_head}, &vars, 1);
  ASSERT_NE(client, nullptr);
  vars.SetGradients(0.5f);
  Result<worker::PushPullResult> r = client->PushAndPull(4);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->global_step, 5);
  EXPECT_EQ(client->routes().epoch(), 2u);
  const std::vector<Message> refused = old_head.Received({MessageType::kPush});
  ASSERT_FALSE(refused.empty()) << "the first push goes to the placed head";
  EXPECT_EQ(refused[0].shard, 0);
  std::vector<Message> resent;
  for (const Message& m : new_head.Received({MessageType::kPush})) {
    if (m.shard == 0) resent.push_back(m);
  }
  ASSERT_FALSE(resent.empty()) << "shard 0's push never reached its new head";
  EXPECT_EQ(resent[0].sequence, refused[0].sequence) << "a resent push keeps its sequence";
  EXPECT_EQ(resent[0].request_id, refused[0].request_id);
  EXPECT_FALSE(new_head.Received({MessageType::kShardMap}).empty());
}

TEST(PsClientRoutesTest, AHigherEpochOnAHeartbeatReplyMakesTheClientFetchTheMap) {
  // Task 0 is silent to everything but heartbeats (cut off from workers); its heartbeat replies
  // show epoch 3, in which task 1 heads both shards. Nobody ever answers kAborted.
  const std::vector<wire::Chain> moved = {{0, {1}, {}}, {1, {1}, {}}};
  FakeServer silent([&](const Message& m) -> std::optional<Message> {
    if (m.type == MessageType::kHeartbeat) return Ok(m, 3);
    return std::nullopt;
  });
  FakeServer head([&](const Message& m) -> std::optional<Message> {
    if (m.type == MessageType::kShardMap) return MapReply(m, 3, moved);
    if (m.type == MessageType::kHeartbeat) return Ok(m, 3);
    return Ok(m, 3, 9);
  });
  testing::SgdVariables vars;
  auto client = ConnectTo({&silent, &head}, &vars, 1);
  ASSERT_NE(client, nullptr);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while ((client->ServerHealth(0).incarnation == 0 || client->ServerHealth(1).incarnation == 0) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_NE(client->ServerHealth(0).incarnation, 0u) << "no heartbeat reply";
  Result<int64_t> step = client->Pull();
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_EQ(*step, 9);
  EXPECT_EQ(client->routes().epoch(), 3u);
  EXPECT_EQ(client->routes().Head(0), 1);
}

TEST(PsClientRoutesTest, HeartbeatRepliesTellTheClientTheGlobalStepWithoutAPull) {
  // What an evaluator waiting for its next interval watches to see that training has ended.
  std::atomic<int64_t> step{0};
  FakeServer server([&](const Message& m) -> std::optional<Message> {
    if (m.type == MessageType::kHeartbeat) return Ok(m, 0, step.load());
    return std::nullopt;  // no pull is answered: the step comes from heartbeats alone
  });
  testing::SgdVariables vars;
  auto client = ConnectTo({&server}, &vars, 0, "evaluator");
  ASSERT_NE(client, nullptr);
  auto wait_for = [&](int64_t want) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (client->HeardStep() < want && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(20));
    }
    return client->HeardStep();
  };
  step = 17;
  EXPECT_EQ(wait_for(17), 17);
  step = 450;
  EXPECT_EQ(wait_for(450), 450);
  step = 3;  // an older reply (a restarted backup, a late shard) never takes it back
  std::this_thread::sleep_for(milliseconds(1500));
  EXPECT_EQ(client->HeardStep(), 450);
}

TEST(PsClientRoutesTest, APulledTensorOfAnotherShapeIsRefusedBeforeAnythingIsCopied) {
  // A server holding the variables split another way (a checkpoint from a run with other
  // --partition_bytes or --replicas) or a hostile one sends a smaller 'fc/weights' than this
  // worker's [4,2]: copying its rows would read past it.
  std::atomic<bool> right{false};
  FakeServer server([&](const Message& m) -> std::optional<Message> {
    Message r = Ok(m, 0, 5);
    r.task_index = 0;
    if (m.type == MessageType::kPull) {
      r.tensors.push_back({"fc/bias", Tensor::Filled(Shape{2}, 7.0f)});
      r.tensors.push_back({"fc/weights", Tensor::Filled(right ? Shape{4, 2} : Shape{2, 2}, 9.0f)});
    }
    return r;
  });
  testing::SgdVariables vars;
  auto client = ConnectTo({&server}, &vars, 0);
  ASSERT_NE(client, nullptr);
  Result<int64_t> step = client->Pull();
  ASSERT_FALSE(step.ok());
  EXPECT_EQ(step.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(step.status().message().find("ps 0 answered a pull of 'fc/weights' with shape [2,2]; "
                                         "this worker's partition is [4,2]"),
            std::string::npos)
      << step.status().message();
  EXPECT_NE(step.status().message().find("--partition_bytes"), std::string::npos);
  EXPECT_EQ(vars.weights.value.ToVector(), std::vector<float>(8, 1.0f)) << "nothing copied";
  EXPECT_EQ(vars.bias.value.ToVector(), std::vector<float>(2, 0.5f)) << "not even the bias";
  right = true;
  step = client->Pull();
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_EQ(vars.weights.value.ToVector(), std::vector<float>(8, 9.0f));
  EXPECT_EQ(vars.bias.value.ToVector(), std::vector<float>(2, 7.0f));
}

TEST(PsClientRoutesTest, TheGlobalStepIsShard0sCommittedStep) {
  // Epoch 1 with the heads swapped: shard 0 on task 1, shard 1 on task 0. Each task refuses the
  // shard it does not head, and answers a pull with a step of its shard's own.
  const std::vector<wire::Chain> swapped = {{0, {1}, {}}, {1, {0}, {}}};
  auto server = [&](int task) {
    return [&, task](const Message& m) -> std::optional<Message> {
      if (m.type == MessageType::kShardMap) return MapReply(m, 1, swapped);
      if (m.type == MessageType::kHeartbeat) return Ok(m, 1);
      const int heads = task == 1 ? 0 : 1;
      if (m.shard != heads) return NotTheHead(m, 1);
      return Ok(m, 1, m.shard == 0 ? 42 : 7);
    };
  };
  FakeServer t0(server(0));
  FakeServer t1(server(1));
  testing::SgdVariables vars;
  auto client = ConnectTo({&t0, &t1}, &vars, 1);
  ASSERT_NE(client, nullptr);
  Result<int64_t> step = client->Pull();
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_EQ(*step, 42);
  vars.SetGradients(0.5f);
  Result<worker::PushPullResult> r = client->PushAndPull(42);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->global_step, 42);
  ASSERT_TRUE(client->Barrier("b", 1).ok());
  const std::vector<Message> barriers = t1.Received({MessageType::kBarrier});
  ASSERT_EQ(barriers.size(), 1u) << "the barrier lives on shard 0's head";
  EXPECT_EQ(barriers[0].shard, 0);
  EXPECT_TRUE(t0.Received({MessageType::kBarrier}).empty());
}

TEST(PsClientRoutesTest, WithNoReplicasRequestsCarryNoShardAndNoMapIsFetched) {
  auto server = [](int64_t step) {
    return [step](const Message& m) -> std::optional<Message> { return Ok(m, 0, step); };
  };
  FakeServer t0(server(11));
  FakeServer t1(server(3));
  testing::SgdVariables vars;
  auto client = ConnectTo({&t0, &t1}, &vars, 0);
  ASSERT_NE(client, nullptr);
  EXPECT_FALSE(client->routes().replicated());
  Result<int64_t> step = client->Pull();
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_EQ(*step, 11);
  vars.SetGradients(0.5f);
  ASSERT_TRUE(client->PushAndPull(11).ok());
  ASSERT_TRUE(client->Barrier("b", 1).ok());
  for (FakeServer* s : {&t0, &t1}) {
    for (const Message& m : s->Received()) {
      EXPECT_EQ(m.shard, -1) << wire::MessageTypeName(m.type);
      EXPECT_NE(m.type, MessageType::kShardMap);
    }
  }
  EXPECT_EQ(t0.Received({MessageType::kBarrier}).size(), 1u);
  EXPECT_EQ(t0.Received({MessageType::kPush})[0].sequence, 1u);
  EXPECT_EQ(t1.Received({MessageType::kPush})[0].sequence, 1u);
}

TEST(PsClientRoutesTest, TheChiefSendsTheEpoch1MapBeforeInitialisingTheHeads) {
  // Servers without a map that take the first one set, hold no variables, and refuse shard
  // requests until they have a map.
  struct State {
    std::mutex mu;
    uint64_t epoch = 0;
  };
  auto server = [](State* state) {
    return [state](const Message& m) -> std::optional<Message> {
      std::lock_guard<std::mutex> lock(state->mu);
      if (m.type == MessageType::kShardMap) {
        if (!m.chains.empty() && m.map_epoch > state->epoch) state->epoch = m.map_epoch;
        return Ok(m, state->epoch);
      }
      if (m.type == MessageType::kHeartbeat) return Ok(m, state->epoch);
      if (state->epoch == 0) return NotTheHead(m, 0);
      Message r = Ok(m, state->epoch);
      if (m.type == MessageType::kRegister) r.value = 0;
      return r;
    };
  };
  State s0, s1;
  FakeServer t0(server(&s0));
  FakeServer t1(server(&s1));
  testing::SgdVariables vars;
  auto chief = ConnectTo({&t0, &t1}, &vars, 1, "chief");
  ASSERT_NE(chief, nullptr);
  Result<worker::PsClient::Initialized> init = chief->Initialize(0);
  ASSERT_TRUE(init.ok()) << init.status().ToString();
  for (FakeServer* t : {&t0, &t1}) {
    const std::vector<Message> got = t->Received();
    size_t set = got.size(), registered = got.size();
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i].type == MessageType::kShardMap && !got[i].chains.empty() && set == got.size()) {
        set = i;
        EXPECT_EQ(got[i].map_epoch, 1u);
        ASSERT_EQ(got[i].chains.size(), 2u);
        EXPECT_EQ(got[i].chains[0], (wire::Chain{0, {0}, {1}}));
        EXPECT_EQ(got[i].chains[1], (wire::Chain{1, {1}, {0}}));
      }
      if (got[i].type == MessageType::kRegister) registered = i;  // the ask, then the init
    }
    EXPECT_LT(set, got.size()) << "no epoch-1 map was set";
    EXPECT_LT(registered, got.size()) << "the head was not initialised";
    EXPECT_LT(set, registered);
  }
  EXPECT_EQ(chief->routes().epoch(), 1u);
  ASSERT_NE(chief->shard_master(), nullptr);
  EXPECT_EQ(chief->shard_master()->map().epoch, 1u);
}

// A fake server task that takes the maps it is set and, asked for its map, returns it as set
// and reports every joiner caught up, as a tail does once a joiner has acknowledged its latest
// record.
struct MapHolder {
  std::mutex mu;
  uint64_t epoch = 0;
  std::vector<wire::Chain> chains;
  std::optional<Message> operator()(const Message& m) {
    std::lock_guard<std::mutex> lock(mu);
    if (m.type == MessageType::kShardMap && !m.chains.empty() && m.map_epoch > epoch) {
      epoch = m.map_epoch;
      chains = m.chains;
    }
    Message r = Ok(m, epoch);
    if (m.type == MessageType::kShardMap && m.chains.empty()) {
      r.chains = chains;
      for (const wire::Chain& c : chains) {
        if (!c.joining.empty()) r.caught_up.push_back({c.shard, c.joining, {}});
      }
    }
    return r;
  }
  uint64_t Epoch() {
    std::lock_guard<std::mutex> lock(mu);
    return epoch;
  }
};

TEST(ShardMasterLoopTest, JoinersReportedCaughtUpArePromotedAndADeadHeadLeavesItsChains) {
  MapHolder h0, h1;
  FakeServer t0([&](const Message& m) { return h0(m); });
  FakeServer t1([&](const Message& m) { return h1(m); });
  const std::vector<std::string> hosts = {t0.host(), t1.host()};
  std::mutex mu;
  std::vector<worker::HeartbeatMonitor::Health> health(2);
  health[0].incarnation = 100;
  health[1].incarnation = 101;
  worker::ShardMaster::Options options;
  options.connect = [&](int t) -> Result<std::unique_ptr<wire::Connection>> {
    return wire::Connection::Connect(wire::TcpEndpoint(hosts[t]));
  };
  options.health = [&](int t) {
    std::lock_guard<std::mutex> lock(mu);
    return health[t];
  };
  options.joiner_poll = milliseconds(50);
  options.watch_interval = milliseconds(20);
  worker::ShardRoutes routes(2, 1, "chief", 0, options.connect);
  auto master = worker::ShardMaster::Create(hosts, 1, "chief 0", &routes, options);
  ASSERT_TRUE(master.ok()) << master.status().ToString();
  ASSERT_TRUE(master.value()->Start(std::chrono::seconds(5)).ok());
  EXPECT_EQ(h0.Epoch(), 1u);
  EXPECT_EQ(h1.Epoch(), 1u);
  master.value()->Watch();
  auto wait_for_epoch = [&](uint64_t epoch) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (h1.Epoch() < epoch && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(20));
    }
    return h1.Epoch();
  };
  // Both joiners are reported caught up by their tails: one new epoch makes them members.
  ASSERT_EQ(wait_for_epoch(2), 2u);
  EXPECT_EQ(master.value()->map().chains, (std::vector<std::vector<int>>{{0, 1}, {1, 0}}));
  {
    std::lock_guard<std::mutex> lock(mu);
    health[0].up = false;
  }
  ASSERT_EQ(wait_for_epoch(3), 3u);
  const replication::ShardMap map = master.value()->map();
  EXPECT_EQ(map.chains, (std::vector<std::vector<int>>{{1}, {1}})) << map.Describe();
  EXPECT_EQ(routes.epoch(), 3u) << "the chief's own routes follow the maps it sends";
  EXPECT_EQ(routes.Head(0), 1);
  master.value()->Stop();
}

// A server's key used to steer every client with a map of a far-future epoch. With keys, a
// client follows only a map its chief proved (common/wire/map_proof.h).
TEST(ShardRoutesTest, WithKeysOnlyAMapTheChiefProvedIsFollowed) {
  const std::string dir = ::testing::TempDir() + "/map_proofs_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(wire::WriteClusterKeys(dir, 2, 2, 1).ok());
  auto keys = [&](const std::string& role, int task) {
    return wire::LoadClusterKeys(dir + "/" + role + "-" + std::to_string(task), role, task).value();
  };
  const wire::ClusterKeys chief = keys("worker", 0), worker = keys("worker", 1),
                          server = keys("ps", 1), evaluator = keys("evaluator", 0);
  replication::ShardMap real;
  real.epoch = 3;
  real.chains = {{0, 1}, {1, 0}};
  real.joining = {{}, {}};
  replication::ShardMap forged = real;
  forged.epoch = 1000000;
  forged.chains = {{1}, {1}};

  auto answer = [](const replication::ShardMap& map, std::vector<wire::MapProof> proofs) {
    return [map, proofs](const Message& m) -> std::optional<Message> {
      Message r = Ok(m, map.epoch);
      if (m.type == MessageType::kShardMap) {
        r.chains = wire::ChainsOf(map);
        r.map_proofs = proofs;
      }
      return r;
    };
  };
  const std::vector<wire::MapProof> proofs = wire::ProveMap(real, chief).value();
  ASSERT_EQ(proofs.size(), 3u) << "one per worker and evaluator key";
  // Forgeries: no proof; the real map's proofs under another map; proofs made with a server's
  // key (the one a forger holds); the chief's proofs of the real map, epoch raised.
  std::vector<wire::MapProof> by_server;
  for (const wire::MapProof& p : proofs) {
    by_server.push_back({p.name, wire::PairTag(server.own.secret_key, chief.own.public_key,
                                               "pstrain shard map v1", "anything")
                                     .value()});
  }
  for (const auto& [what, forgery] :
       std::vector<std::pair<std::string, std::vector<wire::MapProof>>>{
           {"no proof", {}}, {"the real map's proofs", proofs}, {"a server's tags", by_server}}) {
    FakeServer honest(answer(real, proofs));
    FakeServer forger(answer(forged, forgery));
    const std::vector<std::string> hosts = {honest.host(), forger.host()};
    auto connect = [&](int t) { return wire::Connection::Connect(wire::TcpEndpoint(hosts[t])); };
    for (const wire::ClusterKeys& own : {worker, chief, evaluator}) {
      worker::ShardRoutes routes(2, 1, own.own_name, 0, connect, worker::MapCheckOf(own));
      routes.Observe(forged.epoch);  // a reply claimed it
      Result<bool> changed = routes.Fetch([](int) { return true; }, milliseconds(5000));
      ASSERT_TRUE(changed.ok()) << changed.status().ToString();
      EXPECT_EQ(routes.epoch(), 3u) << own.own_name << " followed a map with " << what;
      EXPECT_EQ(routes.Head(0), 0) << own.own_name << ", " << what;
      EXPECT_FALSE(routes.Behind()) << "the forged epoch keeps " << own.own_name << " fetching";
    }
  }
  // Without keys (plaintext) nothing is checked: the highest epoch is followed, as before.
  FakeServer honest(answer(real, {}));
  FakeServer forger(answer(forged, {}));
  const std::vector<std::string> hosts = {honest.host(), forger.host()};
  worker::ShardRoutes plain(2, 1, "worker", 1, [&](int t) {
    return wire::Connection::Connect(wire::TcpEndpoint(hosts[t]));
  });
  ASSERT_TRUE(plain.Fetch([](int) { return true; }, milliseconds(5000)).ok());
  EXPECT_EQ(plain.epoch(), forged.epoch);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pstrain
