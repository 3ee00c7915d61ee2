// ServerTask (ps/server_task.h): a server process holding several shards. Driven in-process
// through Handle, and over real loopback sockets where the point is the sockets: a task without
// replicas answering as its one ParameterServer did, and two tasks whose shards talk.
#include "ps/server_task.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "common/config.h"
#include "common/wire/request.h"
#include "common/wire/same_host.h"
#include "tests/distributed/ports.h"

namespace pstrain {
namespace ps {
namespace {

using std::chrono::milliseconds;
using wire::Message;
using wire::MessageType;

constexpr milliseconds kWait(10000);

Result<std::unique_ptr<VariableStore>> NewStore() {
  auto config = ConfigNode::Parse("{optimizer: {type: sgd}, learning_rate: {initial: 1.0}}", "t");
  return VariableStore::FromConfig(*config);
}

ServerOptions Options(int task, int num_ps, int replicas) {
  ServerOptions o;
  o.task_index = task;
  o.num_ps = num_ps;
  o.replicas = replicas;
  o.train_dir = ::testing::TempDir() + "/server_task_test";
  return o;
}

std::unique_ptr<ServerTask> NewTask(int task, int num_ps, int replicas,
                                    std::unique_ptr<wire::ServerSocket> socket = nullptr,
                                    ServerTaskOptions t = {}) {
  t.server = Options(task, num_ps, replicas);
  t.new_store = NewStore;
  auto created = ServerTask::Create(std::move(t), std::move(socket));
  CHECK(created.ok()) << created.status().ToString();
  return std::move(created).value();
}

// A request as `role` `task` sends it (the chief is worker 0).
Message From(const std::string& role, int task, MessageType type, int shard = -1) {
  static uint64_t next_id = 0;
  Message m = wire::Request(type, role, task, 1);
  m.request_id = ++next_id;
  m.shard = shard;
  return m;
}

Message Register(int shard = -1, float value = 10.0f) {
  Message m = From("chief", 0, MessageType::kRegister, shard);
  m.tensors.push_back({"w", Tensor::Filled(Shape{3}, value)});
  return m;
}

Message Push(int shard, uint64_t sequence, float g) {
  Message m = From("worker", 1, MessageType::kPush, shard);
  m.sequence = sequence;
  m.tensors.push_back({"w", Tensor::Filled(Shape{3}, g)});
  return m;
}

wire::Chain ChainOf(int shard, std::vector<int32_t> tasks, std::vector<int32_t> joining = {}) {
  return wire::Chain{shard, std::move(tasks), std::move(joining)};
}

Message SetMap(uint64_t epoch, std::vector<wire::Chain> chains, const std::string& role = "chief",
               int task = 0) {
  Message m = From(role, task, MessageType::kShardMap);
  m.map_epoch = epoch;
  m.chains = std::move(chains);
  return m;
}

// The one reply `out` holds (requests to other server tasks, such as a head's copy to its
// joiner, are not replies).
Message Only(const std::vector<ServerTask::Outgoing>& out) {
  std::vector<Message> replies;
  for (const auto& o : out) {
    if (o.task < 0) replies.push_back(o.message);
  }
  EXPECT_EQ(replies.size(), 1u);
  return replies.empty() ? Message{} : replies[0];
}

TEST(ServerTaskTest, WithoutReplicasATaskAnswersOverASocketExactlyAsItsOneServerDoes) {
  auto socket = wire::ServerSocket::Bind("tcp://127.0.0.1:0");
  ASSERT_TRUE(socket.ok()) << socket.status().ToString();
  const std::string endpoint = (*socket)->endpoint();
  auto task = NewTask(0, 1, 0, std::move(socket).value());
  std::thread serving([&] { EXPECT_TRUE(task->Serve().ok()); });
  auto conn = wire::Connection::Connect(endpoint);
  ASSERT_TRUE(conn.ok());
  // The same requests to a ParameterServer driven directly give the same answers.
  ParameterServer reference(Options(0, 1, 0), NewStore().value());
  for (const Message& request :
       {Register(), Push(-1, 1, 1.0f), Push(-1, 2, 2.0f), From("worker", 1, MessageType::kPull),
        Push(-1, 2, 2.0f), From("worker", 1, MessageType::kHeartbeat)}) {
    ASSERT_TRUE((*conn)->Send(request).ok());
    Result<Message> got = (*conn)->Receive(kWait);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const Message want = Only(reference.Handle("peer", request));
    EXPECT_EQ(got->type, want.type) << got->text;
    EXPECT_EQ(got->request_id, request.request_id);
    EXPECT_EQ(got->step, want.step);
    EXPECT_EQ(got->value, want.value);
    EXPECT_EQ(got->text, want.text);
    EXPECT_EQ(got->map_epoch, 0u);
    EXPECT_EQ(got->shard, -1);
    ASSERT_EQ(got->tensors.size(), want.tensors.size());
    for (size_t i = 0; i < want.tensors.size(); ++i) {
      EXPECT_EQ(got->tensors[i].name, want.tensors[i].name);
      EXPECT_FLOAT_EQ(got->tensors[i].tensor[0], want.tensors[i].tensor[0]);
    }
  }
  EXPECT_EQ(reference.global_step(), 2);
  ASSERT_TRUE((*conn)->Call(From("chief", 0, MessageType::kShutdown), kWait).ok());
  serving.join();
  EXPECT_EQ(task->shard(0)->global_step(), 2);
  EXPECT_EQ(task->shard(0)->stats().duplicates, 1);
}

TEST(ServerTaskTest, WithoutReplicasAShardMapIsRefusedAsBeforeAndChangesNothing) {
  auto task = NewTask(0, 2, 0);
  const Message reply = Only(task->Handle("chief", SetMap(1, {ChainOf(0, {0}), ChainOf(1, {1})})));
  EXPECT_EQ(reply.type, MessageType::kError);
  EXPECT_EQ(reply.error_code, StatusCode::kFailedPrecondition) << reply.text;
  EXPECT_EQ(task->map().epoch, 0u);
  EXPECT_EQ(task->held_shards(), std::vector<int>{0});
}

TEST(ServerTaskTest, WithReplicasNothingIsServedBeforeTheFirstMap) {
  auto task = NewTask(0, 2, 1);
  const Message reply = Only(task->Handle("chief", Register()));
  EXPECT_EQ(reply.type, MessageType::kError);
  EXPECT_EQ(reply.error_code, StatusCode::kAborted);
  EXPECT_EQ(reply.text, "ps 0: not the head of shard 0 at map epoch 0 (head: none)");
  EXPECT_FALSE(task->shard(0)->initialized());
}

TEST(ServerTaskTest, ARequestForAShardThisTaskDoesNotHeadIsAbortedNamingTheHeadAndChangesNothing) {
  auto task = NewTask(0, 2, 1);
  // Task 0 heads shard 0 and is joining shard 1, whose head is task 1.
  ASSERT_EQ(
      Only(task->Handle("chief", SetMap(1, {ChainOf(0, {0}, {1}), ChainOf(1, {1}, {0})}))).type,
      MessageType::kOk);
  EXPECT_EQ(task->held_shards(), (std::vector<int>{0, 1}));
  EXPECT_EQ(Only(task->Handle("chief", Register(0))).type, MessageType::kOk);
  for (const Message& request :
       {Register(1), Push(1, 1, 1.0f), From("worker", 1, MessageType::kPull, 1)}) {
    const Message reply = Only(task->Handle("w1", request));
    EXPECT_EQ(reply.type, MessageType::kError);
    EXPECT_EQ(reply.error_code, StatusCode::kAborted);
    EXPECT_EQ(reply.text, "ps 0: not the head of shard 1 at map epoch 1 (head: task 1)");
    EXPECT_EQ(reply.shard, 1);
  }
  EXPECT_FALSE(task->shard(1)->initialized());
  EXPECT_EQ(task->shard(1)->stats().pushes, 0);
  EXPECT_TRUE(task->shard(1)->peers().empty());
  // A shard outside the cluster is refused by name.
  const Message bad = Only(task->Handle("w1", Push(7, 1, 1.0f)));
  EXPECT_EQ(bad.error_code, StatusCode::kInvalidArgument);
  EXPECT_NE(bad.text.find("shard 7 is not one of the cluster's 2 shards"), std::string::npos);
  EXPECT_EQ(task->shard(0)->stats().pushes, 0);
}

TEST(ServerTaskTest, AShardMapSetByTheChiefCreatesAndDropsShardsAndAGetReturnsItWithItsEpoch) {
  auto task = NewTask(0, 3, 1);
  const std::vector<wire::Chain> first = {ChainOf(0, {0, 1}), ChainOf(1, {1, 2}),
                                          ChainOf(2, {2, 0})};
  Message set = Only(task->Handle("chief", SetMap(1, first)));
  EXPECT_EQ(set.type, MessageType::kOk) << set.text;
  EXPECT_EQ(set.map_epoch, 1u);
  EXPECT_EQ(task->held_shards(), (std::vector<int>{0, 2}));
  Message got = Only(task->Handle("w1", From("worker", 1, MessageType::kShardMap)));
  EXPECT_EQ(got.type, MessageType::kOk);
  EXPECT_EQ(got.map_epoch, 1u);
  EXPECT_EQ(got.chains, first);

  // Task 0 leaves shards 0 and 2 and joins shard 1.
  const std::vector<wire::Chain> second = {ChainOf(0, {1}), ChainOf(1, {1, 2}, {0}),
                                           ChainOf(2, {2})};
  set = Only(task->Handle("chief", SetMap(2, second)));
  EXPECT_EQ(set.map_epoch, 2u);
  EXPECT_EQ(task->held_shards(), std::vector<int>{1});
  EXPECT_FALSE(task->shard(1)->initialized());  // empty, waiting for its copy
  got = Only(task->Handle("e0", From("evaluator", 0, MessageType::kShardMap)));
  EXPECT_EQ(got.map_epoch, 2u);
  EXPECT_EQ(got.chains, second);
}

TEST(ServerTaskTest, AShardMapSetFromAWorkerIsRefusedAndChangesNothing) {
  auto task = NewTask(0, 2, 1);
  const Message reply =
      Only(task->Handle("w1", SetMap(1, {ChainOf(0, {1}), ChainOf(1, {1})}, "worker", 1)));
  EXPECT_EQ(reply.type, MessageType::kError);
  EXPECT_EQ(reply.error_code, StatusCode::kPermissionDenied) << reply.text;
  EXPECT_EQ(task->map().epoch, 0u);
  EXPECT_EQ(task->held_shards(), std::vector<int>{0});
}

TEST(ServerTaskTest, AnOlderOrEqualEpochChangesNothingAndIsAnsweredWithTheCurrentOne) {
  auto task = NewTask(0, 2, 1);
  ASSERT_EQ(
      Only(task->Handle("chief", SetMap(2, {ChainOf(0, {0, 1}), ChainOf(1, {1, 0})}))).map_epoch,
      2u);
  const replication::ShardMap before = task->map();
  for (uint64_t epoch : {1, 2}) {
    const Message reply =
        Only(task->Handle("chief", SetMap(epoch, {ChainOf(0, {1}), ChainOf(1, {1})})));
    EXPECT_EQ(reply.type, MessageType::kOk);
    EXPECT_EQ(reply.map_epoch, 2u);
  }
  EXPECT_EQ(task->map(), before);
  EXPECT_EQ(task->held_shards(), (std::vector<int>{0, 1}));
}

TEST(ServerTaskTest, AMalformedMapIsRefusedNamingWhatIsWrongAndChangesNothing) {
  auto task = NewTask(0, 2, 1);
  const std::vector<std::pair<std::vector<wire::Chain>, std::string>> cases = {
      {{ChainOf(0, {0})}, "one chain per shard: 2"},
      {{ChainOf(0, {0}), ChainOf(0, {1})}, "shard 0 is listed twice"},
      {{ChainOf(0, {0}), ChainOf(1, {5})}, "shard 1 names task 5"},
      {{ChainOf(0, {0}, {0}), ChainOf(1, {1})}, "shard 0 names task 0 twice"},
      {{ChainOf(0, {0}), ChainOf(3, {1})}, "shard 3 is not one of the cluster's 2 shards"}};
  for (const auto& [chains, why] : cases) {
    const Message reply = Only(task->Handle("chief", SetMap(1, chains)));
    EXPECT_EQ(reply.error_code, StatusCode::kInvalidArgument);
    EXPECT_NE(reply.text.find(why), std::string::npos) << reply.text;
  }
  EXPECT_EQ(task->map().epoch, 0u);
  EXPECT_EQ(task->held_shards(), std::vector<int>{0});
}

TEST(ServerTaskTest, EveryReplyCarriesTheMapEpochAndEveryShardsReplyItsShard) {
  auto task = NewTask(0, 2, 1);
  ASSERT_EQ(Only(task->Handle("chief", SetMap(3, {ChainOf(0, {0}, {1}), ChainOf(1, {1}, {0})})))
                .map_epoch,
            3u);
  for (const Message& request :
       {Register(0), From("worker", 1, MessageType::kPull, 0), Push(0, 1, 1.0f),
        From("worker", 1, MessageType::kPull, 1), From("worker", 1, MessageType::kPull, 5),
        From("worker", 1, MessageType::kHeartbeat), From("worker", 1, MessageType::kShardMap),
        From("ps", 1, MessageType::kPull, 0)}) {
    const Message reply = Only(task->Handle("w1", request));
    EXPECT_EQ(reply.map_epoch, 3u) << wire::MessageTypeName(request.type) << ": " << reply.text;
    EXPECT_EQ(reply.shard, request.shard) << reply.text;
  }
}

TEST(ServerTaskTest, AHeartbeatReachesEveryHeldShardAndIsAnsweredOnce) {
  auto task = NewTask(0, 2, 1);
  task->Handle("chief", SetMap(1, {ChainOf(0, {0, 1}), ChainOf(1, {1, 0})}));
  const Message reply = Only(task->Handle("w1", From("worker", 1, MessageType::kHeartbeat)));
  EXPECT_EQ(reply.type, MessageType::kOk);
  for (int s : {0, 1}) EXPECT_EQ(task->shard(s)->peers().count("worker 1"), 1u) << "shard " << s;
}

TEST(ServerTaskTest, RequestsToATaskNotThereNeverBlockTheLoopAndArriveInOrderWhenItComes) {
  // Nobody listens there. Below the ephemeral range: a port a kernel may also give as a source
  // port lets the connection's retries meet themselves (TCP's simultaneous open), and ZeroMQ
  // then delivers its queued requests to itself (seen once under CI's load).
  const int port = testing::PickPort();
  auto own = wire::ServerSocket::Bind("tcp://127.0.0.1:0");
  ASSERT_TRUE(own.ok());
  ServerTaskOptions o;
  o.ps_hosts = {(*own)->endpoint().substr(6), "127.0.0.1:" + std::to_string(port)};
  auto task = NewTask(0, 2, 1, std::move(own).value(), o);
  constexpr int kRecords = 500;  // well beyond what ZeroMQ queues for a task (100)
  std::vector<ServerTask::Outgoing> out;
  for (int i = 1; i <= kRecords; ++i) {
    ServerTask::Outgoing o;
    o.task = 1;
    o.message.type = MessageType::kReplicate;
    o.message.shard = 0;
    o.message.request_id = static_cast<uint64_t>(i);
    out.push_back(o);
  }
  const auto start = std::chrono::steady_clock::now();
  task->Send(out);
  ASSERT_TRUE(task->Step(milliseconds(10)).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2000));

  auto successor = wire::ServerSocket::Bind("tcp://127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(successor.ok()) << successor.status().ToString();
  uint64_t next = 1;
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (next <= kRecords && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(task->Step(milliseconds(1)).ok());
    Result<wire::Incoming> in = (*successor)->Receive(milliseconds(5));
    if (!in.ok() || !in->message.ok()) continue;
    EXPECT_EQ(in->message->request_id, next) << "out of order";
    EXPECT_EQ(in->message->role, "ps");
    EXPECT_EQ(in->message->task_index, 0);
    next = in->message->request_id + 1;
  }
  EXPECT_EQ(next, kRecords + 1u) << "not every request arrived";
}

// Two tasks on loopback: plaintext, or with their ps-<t> keys over the same-host socket beside the
// keys (two servers on one host), or over CURVE on TCP (--same_host_ipc=false, as across hosts).
enum class Link { kPlaintext, kSameHost, kCurveTcp };
class ServerTaskPairTest : public ::testing::TestWithParam<Link> {};

TEST_P(ServerTaskPairTest, ARequestAShardSendsToAnotherTaskReachesItAndItsReplyComesBack) {
  const bool curve = GetParam() != Link::kPlaintext;
  const std::string dir = ::testing::TempDir() + "/server_task_keys_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::vector<wire::ClusterKeys> keys(2);
  if (curve) {
    ASSERT_TRUE(wire::WriteClusterKeys(dir, 2, 1, 0).ok());
    for (int t : {0, 1}) {
      auto k = wire::LoadClusterKeys(dir + "/ps-" + std::to_string(t), "ps", t);
      ASSERT_TRUE(k.ok()) << k.status().ToString();
      keys[t] = *k;
      keys[t].same_host_ipc = GetParam() == Link::kSameHost;
    }
  }
  std::vector<std::unique_ptr<wire::ServerSocket>> sockets;
  std::vector<std::string> hosts;
  for (int t : {0, 1}) {
    auto s = wire::ServerSocket::Bind("tcp://127.0.0.1:0", {}, keys[t].ForServer());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    if (GetParam() == Link::kSameHost) {
      ASSERT_TRUE((*s)->ListenAlsoOn(wire::SameHostEndpoint(keys[t], t)).ok());
    }
    hosts.push_back((*s)->endpoint().substr(std::string("tcp://").size()));
    sockets.push_back(std::move(s).value());
  }
  std::atomic<int> replies{0};
  Message seen;
  int seen_shard = -1, seen_from = -1;
  std::vector<std::unique_ptr<ServerTask>> tasks;
  for (int t : {0, 1}) {
    ServerTaskOptions o;
    o.ps_hosts = hosts;
    o.keys = keys[t];
    if (t == 0) {
      o.on_server_reply = [&](int shard, int from, const Message& reply) {
        seen = reply;
        seen_shard = shard;
        seen_from = from;
        ++replies;
      };
    }
    tasks.push_back(NewTask(t, 2, 1, std::move(sockets[t]), o));
    const Message set =
        Only(tasks[t]->Handle("chief", SetMap(1, {ChainOf(0, {0, 1}), ChainOf(1, {1, 0})})));
    ASSERT_EQ(set.type, MessageType::kOk) << set.text;
  }
  std::thread serving([&] { EXPECT_TRUE(tasks[1]->Serve().ok()); });

  // What shard 0's chain sends its successor: a record, as Outgoing::task names it.
  Message record;
  record.type = MessageType::kReplicate;
  record.request_id = 77;
  record.shard = 0;
  record.sequence = 1;
  ParameterServer::Outgoing to_successor;
  to_successor.task = 1;
  to_successor.message = record;
  tasks[0]->Send({to_successor});
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (replies == 0 && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(tasks[0]->Step(milliseconds(100)).ok());
  }
  ASSERT_EQ(replies, 1) << "no reply from ps 1 came back to shard 0";
  EXPECT_EQ(seen_shard, 0);
  EXPECT_EQ(seen_from, 1);
  EXPECT_EQ(seen.request_id, 77u);
  EXPECT_EQ(seen.role, "ps");
  EXPECT_EQ(seen.task_index, 1);
  EXPECT_EQ(seen.map_epoch, 1u);
  // Task 1 took it as ps 0's (its key, its header): never refused as someone else's.
  EXPECT_EQ(seen.text.find("claims"), std::string::npos) << seen.text;
  EXPECT_EQ(seen.text.find("may not send"), std::string::npos) << seen.text;

  // Task 1 stops on its chief's shutdown (worker 0's key, with CURVE).
  wire::Security chief;
  if (curve) {
    auto worker_keys = wire::LoadClusterKeys(dir + "/worker-0", "worker", 0);
    ASSERT_TRUE(worker_keys.ok()) << worker_keys.status().ToString();
    chief = worker_keys->ForClientOf(1).value();
  }
  auto conn = wire::Connection::Connect("tcp://" + hosts[1], {}, chief);
  ASSERT_TRUE(conn.ok());
  ASSERT_TRUE((*conn)->Call(From("chief", 0, MessageType::kShutdown), kWait).ok());
  serving.join();
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(EveryLink, ServerTaskPairTest,
                         ::testing::Values(Link::kPlaintext, Link::kSameHost, Link::kCurveTcp));

}  // namespace
}  // namespace ps
}  // namespace pstrain
