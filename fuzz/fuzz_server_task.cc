// Fuzzes ServerTask::Handle (ps/server_task.h): a server process's routing of requests by shard
// and its shard map. The input picks the cluster (2 to 4 servers), this task and --replicas, then
// a sequence of requests: shard map sets of any epoch and chains (from the chief or anyone
// else), gets, registers, pulls, pushes and replicates for any shard, heartbeats. Every request
// goes through Encode and Decode first. Invariants: every reply carries the task's map epoch,
// which never goes down; after a set the task holds exactly the shards its map puts it in; a
// request answered kAborted changed no shard. (Request ids are random bytes, so a request may
// reuse the id of an earlier one its own call left unanswered, such as a push held for its step,
// which a set that moves the shard away aborts: that abort answers the earlier request, so the
// check skips a request whose id an unanswered one carried.)
#include <glog/logging.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/config.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_setup.h"
#include "fuzz/through_the_wire.h"
#include "ps/server_task.h"

namespace pstrain {
namespace ps {
namespace {

using fuzz::FuzzInput;
using wire::Message;
using wire::MessageType;

std::string g_train_dir;

Result<std::unique_ptr<VariableStore>> NewStore() {
  auto config = ConfigNode::Parse("{optimizer: {type: sgd}, learning_rate: {initial: 0.5}}", "f");
  CHECK(config.ok()) << config.status().ToString();
  return VariableStore::FromConfig(*config);
}

const std::vector<std::string> kRoles = {"chief", "worker", "evaluator", "ps"};

std::vector<int32_t> Tasks(FuzzInput& in, int num_ps, int most) {
  std::vector<int32_t> tasks(in.Range(0, most));
  for (int32_t& t : tasks) t = static_cast<int32_t>(in.Range(-1, num_ps));
  return tasks;
}

Message Request(FuzzInput& in, int num_ps, uint64_t* sequence) {
  Message m;
  m.role = in.Pick(kRoles);
  m.task_index = static_cast<int32_t>(in.Range(0, 2));
  if (m.role == "chief") m.task_index = 0;
  m.incarnation = 1;
  m.request_id = in.Raw<uint8_t>();
  m.shard = static_cast<int32_t>(in.Range(-2, num_ps));
  switch (in.Range(0, 6)) {
    case 0:  // a map set
      m.type = MessageType::kShardMap;
      m.shard = -1;
      m.map_epoch = static_cast<uint64_t>(in.Range(0, 5));
      for (int64_t c = in.Range(1, num_ps + 1); c > 0; --c) {
        wire::Chain chain;
        chain.shard = static_cast<int32_t>(in.Range(-1, num_ps));
        chain.tasks = Tasks(in, num_ps, 3);
        chain.joining = Tasks(in, num_ps, 2);
        m.chains.push_back(std::move(chain));
      }
      break;
    case 1:
      m.type = MessageType::kShardMap;  // a get
      break;
    case 2:
      m.type = MessageType::kRegister;
      if (in.Bool()) m.tensors.push_back({"w", Tensor::Filled(Shape{2}, 1.0f)});
      break;
    case 3:
      m.type = MessageType::kPull;
      break;
    case 4:
      m.type = MessageType::kPush;
      m.sequence = ++*sequence;
      m.tensors.push_back({"w", Tensor::Filled(Shape{2}, 0.25f)});
      break;
    case 5:
      m.type = MessageType::kHeartbeat;
      break;
    default:
      m.type = MessageType::kReplicate;
      m.sequence = static_cast<uint64_t>(in.Range(0, 3));
      break;
  }
  return m;
}

struct ShardState {
  bool initialized;
  int64_t step;
  size_t pending;
};

std::map<int, ShardState> States(const ServerTask& task) {
  std::map<int, ShardState> states;
  for (int s : task.held_shards()) {
    const ParameterServer* server = task.shard(s);
    states[s] = {server->initialized(), server->global_step(), server->pending_requests()};
  }
  return states;
}

}  // namespace
}  // namespace ps
}  // namespace pstrain

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  pstrain::fuzz::QuietLogs();
  pstrain::ps::g_train_dir = pstrain::fuzz::TempDirForProcess("server-task");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain;
  using namespace pstrain::ps;
  fuzz::FuzzInput in(data, size);
  std::filesystem::remove_all(g_train_dir);
  ServerTaskOptions o;
  o.server.num_ps = static_cast<int>(in.Range(2, 4));
  o.server.task_index = static_cast<int>(in.Range(0, o.server.num_ps - 1));
  o.server.replicas = static_cast<int>(in.Range(0, o.server.num_ps - 1));
  o.server.train_dir = g_train_dir;
  o.new_store = NewStore;
  const int self = o.server.task_index;
  const int num_ps = o.server.num_ps;
  auto created = ServerTask::Create(std::move(o), nullptr);
  CHECK(created.ok()) << created.status().ToString();
  ServerTask& task = **created;
  uint64_t sequence = 0;
  // Ids of earlier requests that their own Handle did not answer (held pushes). A later reply
  // with such an id may answer any of the requests that carried it, so it stays in the set.
  std::set<uint64_t> unanswered;
  for (int i = 0; i < 64 && !in.empty(); ++i) {
    Message m = Request(in, num_ps, &sequence);
    if (!fuzz::ThroughTheWire(&m)) continue;
    const uint64_t epoch = task.map().epoch;
    const std::map<int, ShardState> before = States(task);
    const bool id_in_use = unanswered.count(m.request_id) > 0;
    const std::vector<ServerTask::Outgoing> out = task.Handle("peer", m);
    CHECK_GE(task.map().epoch, epoch) << "the map epoch went down";
    bool answered = false;
    for (const ServerTask::Outgoing& reply : out) {
      answered |= reply.task < 0 && reply.peer == "peer" && reply.message.request_id == m.request_id;
    }
    if (!answered) unanswered.insert(m.request_id);
    for (const ServerTask::Outgoing& reply : out) {
      if (reply.task >= 0) continue;
      CHECK_EQ(reply.message.map_epoch, task.map().epoch) << "a reply without the map epoch";
      if (reply.message.request_id != m.request_id || reply.peer != "peer" || id_in_use) continue;
      if (reply.message.error_code != StatusCode::kAborted) continue;
      for (const auto& [s, state] : States(task)) {
        auto was = before.find(s);
        CHECK(was != before.end()) << "an aborted request created shard " << s;
        CHECK(was->second.initialized == state.initialized && was->second.step == state.step &&
              was->second.pending == state.pending)
            << "an aborted request changed shard " << s << ": " << reply.message.text;
      }
    }
    if (task.map().epoch > epoch) {  // a set was adopted: the shards held are the map's
      std::vector<int> expected;
      for (int s = 0; s < task.map().num_shards(); ++s) {
        for (const auto* list : {&task.map().chains[s], &task.map().joining[s]}) {
          if (std::find(list->begin(), list->end(), self) != list->end()) expected.push_back(s);
        }
      }
      CHECK(task.held_shards() == expected) << "the shards held are not the map's";
    }
  }
  return 0;
}
