// Fuzzes ParameterServer::Handle, the server's answer to every request a peer sends. The input
// picks the update mode, optimizer, schedule and clipping, whether the chief initialises the
// variables, then a sequence of requests: pushes with right and wrong names, shapes and values
// (NaN, Inf, huge), pulls, barriers, heartbeats, checkpoints, restarts from the checkpoint and
// shutdowns, and the replication requests (replicate, replica copy, shard map, data lease) with
// their fields. Every request goes through Encode and Decode first, so the server only sees what
// the network could deliver. Invariants: a push answered with an error changed no variable or slot
// (bitwise), a restart restores exactly what the checkpoint saved, and a server without a chain
// (docs/replication.md) answers a replication request with an error and changes nothing.
// Senders draw incarnations (a restart, a zombie, one from the far future), barrier names and
// magnitudes up to and past what an optimizer's state can take; with one step per pull on, the
// global step never moves by more pushes than the pulls answered (plus one first push a peer).
// The server holds embedding table C1 (ps/table_shard.h): row pulls and pushes with ids, names,
// shapes and values right and wrong; a refused row push changes no row, and a restart restores
// the rows with the variables.
#include <glog/logging.h>
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/wire/codec.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_setup.h"
#include "fuzz/through_the_wire.h"
#include "ps/server.h"

namespace pstrain {
namespace ps {
namespace {

using fuzz::FuzzInput;
using fuzz::ThroughTheWire;
using wire::Message;
using wire::MessageType;

std::string g_train_dir;  // a fresh temp dir per process, emptied per input

const std::vector<std::string> kOptimizers = {
    "{type: sgd}",     "{type: momentum, momentum: 0.9, nesterov: true}", "{type: adam}",
    "{type: adagrad}", "{type: rmsprop, momentum: 0.5, centered: true}",
};
const std::vector<std::string> kSchedules = {
    "{initial: 0.5}",
    "{schedule: exponential_decay, initial: 1.0, decay_steps: 2, decay_rate: 0.5}",
    "{schedule: piecewise_constant, boundaries: [1, 3], values: [1.0, 0.1, 0.01]}",
};
const std::vector<std::string> kClipping = {"", ", clipping: {by_value: [-1.0, 1.0]}",
                                            ", clipping: {by_norm: 1.0}"};

// The chief's variables: a matrix, a vector, a scalar and an empty tensor.
const std::vector<std::pair<std::string, Shape>> kVariables = {
    {"w", Shape{2, 3}}, {"b", Shape{3}}, {"s", Shape{}}, {"e", Shape{0}}};
const std::vector<std::string> kPeers = {"chief", "w0", "w1", "w2"};
const std::vector<std::string> kIdentities = {"", "worker-0", "worker-1", "evaluator-0", "ps-0"};

// The table's rows: few, so that a pull can fill it.
constexpr int64_t kTableRows = 6;

std::unique_ptr<ParameterServer> NewServer(const ServerOptions& options,
                                           const std::string& train_config) {
  auto config = ConfigNode::Parse(train_config, "fuzz");
  CHECK(config.ok()) << config.status().ToString();
  auto store = VariableStore::FromConfig(*config);
  CHECK(store.ok()) << store.status().ToString();
  auto server = std::make_unique<ParameterServer>(options, std::move(store).value());
  // The tables take the dense optimizer and schedule: train_config plus the list.
  std::string tables = train_config;
  tables.insert(tables.size() - 1,
                ", list: [{name: C1, dimension: 2, max_rows: " + std::to_string(kTableRows) + "}]");
  auto tables_node = ConfigNode::Parse(tables, "fuzz tables");
  CHECK(tables_node.ok()) << tables_node.status().ToString();
  auto shard = TableShard::FromConfig(*tables_node, 0, {0, 1, 0});
  CHECK(shard.ok()) << shard.status().ToString();
  server->SetTables(std::move(shard).value());
  return server;
}

// Mostly ordinary numbers, sometimes raw bits: NaN, Inf, denormals and huge values.
float Value(FuzzInput& in) {
  static const std::vector<float> kValues = {0.0f,
                                             1.0f,
                                             -1.0f,
                                             0.25f,
                                             1e30f,
                                             -1e30f,
                                             std::numeric_limits<float>::quiet_NaN(),
                                             std::numeric_limits<float>::infinity(),
                                             std::numeric_limits<float>::max(),
                                             std::numeric_limits<float>::denorm_min(),
                                             1.15e18f,  // 2^60: the bound of Adam's state
                                             -4e18f};
  const uint8_t b = in.Byte();
  if (b < 200) return kValues[b % kValues.size()];
  return in.Raw<float>();
}

std::string Name(FuzzInput& in) {
  const uint8_t b = in.Byte();
  if (b < 200) return kVariables[b % kVariables.size()].first;
  return in.Bytes(b % 8);  // unknown, empty, or with odd bytes (',', '/', '\0')
}

// Usually the variable's own shape, sometimes another (rank up to 3, dims up to 4).
Shape ShapeFor(FuzzInput& in, const std::string& name) {
  if (in.Byte() < 200) {
    for (const auto& [n, shape] : kVariables) {
      if (n == name) return shape;
    }
  }
  std::vector<int64_t> dims(in.Range(0, 3));
  for (int64_t& d : dims) d = in.Range(0, 4);
  return Shape(dims);
}

wire::NamedTensor TensorFor(FuzzInput& in, const std::string& name) {
  Tensor t(ShapeFor(in, name));
  for (int64_t i = 0; i < t.size(); ++i) t[i] = Value(in);
  return {name, t};
}

int64_t Step(FuzzInput& in, int64_t global_step) {
  switch (in.Range(0, 3)) {
    case 0:
      return global_step;
    case 1:
      return global_step - in.Range(1, 4);
    case 2:
      return in.Range(0, 8);
    default:
      return in.Raw<int64_t>();
  }
}

Message Request(FuzzInput& in, MessageType type, uint64_t id, int64_t global_step) {
  Message m;
  m.type = type;
  m.request_id = id;
  m.role = in.Pick<std::string>({"chief", "worker", "evaluator", ""});
  m.task_index = static_cast<int32_t>(in.Range(-1, 3));
  m.step = Step(in, global_step);
  // Two processes of each role (a restart, or a zombie), the unnumbered 0, one started now and
  // one from the far future.
  m.incarnation = in.Pick<uint64_t>({0, 100, 200, wire::ProcessIncarnation(), UINT64_MAX});
  m.sequence = in.Bool() ? static_cast<uint64_t>(in.Range(0, 4)) : in.Raw<uint64_t>();
  m.value = in.Bool() ? in.Range(0, 4) : in.Raw<int64_t>();
  // Barrier names: the real ones, and more than a participant may wait at together.
  m.text = in.Pick<std::string>({"", "start", "end", "done", "a", "b", "c", "d"});
  for (int64_t n = in.Range(0, 3); n > 0; --n) m.names.push_back(Name(in));
  for (int64_t n = in.Range(0, 2); n > 0; --n) m.assigns.push_back(Name(in));
  m.root = static_cast<int32_t>(in.Range(0, 1));  // no request of a server's has one
  for (int64_t n = in.Range(0, 3); n > 0; --n) m.tensors.push_back(TensorFor(in, Name(in)));
  return m;
}

// The fields only the replication requests carry, and the sender a server is (role "ps").
void ReplicationFields(FuzzInput& in, Message* m) {
  if (in.Bool()) m->role = "ps";
  m->shard = static_cast<int32_t>(in.Range(-1, 2));
  m->map_epoch = static_cast<uint64_t>(in.Range(0, 3));
  for (int64_t n = in.Range(0, 2); n > 0; --n) {
    wire::PushEntry e;
    e.role = in.Pick<std::string>({"worker", "chief", "ps", ""});
    e.task_index = static_cast<int32_t>(in.Range(-1, 3));
    e.incarnation = in.Pick<uint64_t>({0, 100, 200});
    e.sequence = static_cast<uint64_t>(in.Range(0, 4));
    e.reply_step = in.Range(0, 4);
    e.reply_value = in.Range(-1, 1);
    e.reply_text = in.Pick<std::string>({"", "stale"});
    m->pushes.push_back(e);
  }
  for (int64_t n = in.Range(0, 2); n > 0; --n) {
    wire::Chain c;
    c.shard = static_cast<int32_t>(in.Range(-1, 2));
    for (int64_t t = in.Range(0, 3); t > 0; --t)
      c.tasks.push_back(static_cast<int32_t>(in.Range(-1, 3)));
    for (int64_t t = in.Range(0, 2); t > 0; --t)
      c.joining.push_back(static_cast<int32_t>(in.Range(-1, 3)));
    m->chains.push_back(c);
  }
  for (int64_t n = in.Range(0, 2); n > 0; --n) {
    const int64_t epoch = in.Range(-1, 2);
    const int64_t chunk = in.Range(0, 8);
    m->uses.push_back({epoch, chunk, in.Range(0, 255)});
  }
}

// A row request's fields: the table (C1, or one the server lacks), ids (repeats, and raw ones
// the codec refuses when negative) and, for a push, gradient rows of the table's dimension or
// another.
void RowFields(FuzzInput& in, Message* m) {
  m->names.clear();  // what Request drew that no row request carries
  m->assigns.clear();
  m->value = 0;
  m->root = 0;
  if (m->type == MessageType::kRowPull) m->step = m->sequence = 0;
  m->text = in.Pick<std::string>({"C1", "C1", "C2", ""});
  for (int64_t n = in.Range(0, kTableRows + 1); n > 0; --n) {
    m->ids.push_back(in.Bool() ? in.Range(0, 9) : in.Raw<int64_t>());
  }
  m->tensors.clear();
  if (m->type == MessageType::kRowPull) return;
  const int64_t rows = in.Byte() < 200 ? static_cast<int64_t>(m->ids.size()) : in.Range(0, 3);
  Tensor g(Shape{rows, in.Byte() < 200 ? 2 : in.Range(1, 3)});
  for (int64_t i = 0; i < g.size(); ++i) g[i] = Value(in);
  m->tensors.push_back({in.Byte() < 200 ? m->text : Name(in), g});
}

// Every variable, slot and table row, copied: the store updates in place.
using Snapshot = std::map<std::string, std::pair<Shape, std::string>>;
Snapshot Take(const ParameterServer& server) {
  std::map<std::string, Tensor> state = server.store().StateTensors();
  server.tables()->SaveTo(&state);
  Snapshot s;
  for (const auto& [name, t] : state) {
    s[name] = {t.shape(), std::string(reinterpret_cast<const char*>(t.data()), t.bytes())};
  }
  return s;
}

void CheckSame(const Snapshot& before, const Snapshot& after, const std::string& what) {
  CHECK_EQ(before.size(), after.size()) << what << ": the set of variables changed";
  for (const auto& [name, value] : before) {
    auto it = after.find(name);
    CHECK(it != after.end()) << what << ": '" << name << "' disappeared";
    CHECK(it->second.first == value.first) << what << ": '" << name << "' changed shape";
    CHECK(it->second.second == value.second) << what << ": '" << name << "' changed";
  }
}

}  // namespace
}  // namespace ps
}  // namespace pstrain

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  pstrain::fuzz::QuietLogs();
  pstrain::ps::g_train_dir = pstrain::fuzz::TempDirForProcess("ps");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain;
  using namespace pstrain::ps;
  FuzzInput in(data, size);
  std::filesystem::remove_all(g_train_dir);

  ServerOptions options;
  options.mode = static_cast<UpdateMode>(in.Range(0, 2));
  options.num_workers = static_cast<int>(in.Range(1, 3));
  options.accumulate_n = static_cast<int>(in.Range(0, 3));
  options.max_staleness = in.Range(0, 3);
  options.backup_workers = static_cast<int>(in.Range(0, 1));
  options.train_dir = g_train_dir;
  options.max_to_keep = static_cast<int>(in.Range(1, 2));
  // No byte of its own, so that saved inputs keep their meaning: on for odd worker counts.
  options.one_push_per_pull = options.num_workers % 2 == 1;
  // One read per statement: the operands of + are evaluated in no fixed order.
  const std::string optimizer = in.Pick(kOptimizers);
  const std::string schedule = in.Pick(kSchedules);
  const std::string clipping = in.Pick(kClipping);
  const std::string train_config =
      "{optimizer: " + optimizer + ", learning_rate: " + schedule + clipping + "}";
  std::unique_ptr<ParameterServer> server = NewServer(options, train_config);

  if (in.Bool()) {  // the chief initialises, as in a real cluster
    Message init;
    init.type = MessageType::kRegister;
    init.role = "chief";
    init.task_index = 0;
    init.incarnation = 100;
    for (const auto& [name, shape] : kVariables) init.tensors.push_back({name, Tensor(shape)});
    for (auto& t : init.tensors) {
      for (int64_t i = 0; i < t.tensor.size(); ++i) t.tensor[i] = Value(in);
    }
    CHECK(ThroughTheWire(&init));
    server->Handle("chief", init);
    CHECK(server->initialized());
  }

  // What the last successful checkpoint saved, to compare a restart with.
  bool saved = false;
  Snapshot saved_state;
  int64_t saved_step = 0;
  // Pulls answered by this server process, and its step when it started.
  int64_t pulls = 0;
  int64_t first_step = server->global_step();
  for (uint64_t id = 1; !in.empty() && id < 64; ++id) {
    // 0..8 as they always were; the top four bytes are the replication requests, the two
    // below them a row pull and a row push (13, 14).
    const uint8_t byte = in.Byte();
    const uint8_t op = byte >= 252 ? 9 + (byte - 252) : byte >= 250 ? 13 + (byte - 250) : byte % 9;
    const bool rows = op >= 13;
    if (op == 8) {  // restart: a new server process restores the last step it saved
      auto restarted = NewServer(options, train_config);
      if (saved) {
        Status s = restarted->RestoreStep(saved_step);
        CHECK(s.ok()) << "a checkpoint this server saved does not restore: " << s.ToString();
        CheckSame(saved_state, Take(*restarted), "restart");
        CHECK_EQ(restarted->global_step(), saved_step);
      }
      server = std::move(restarted);
      pulls = 0;
      first_step = server->global_step();
      continue;
    }
    // 0..6: register to shutdown; 7: the chief's restore; 9..12: replicate to data lease.
    const bool replication = op >= 9 && !rows;
    const MessageType type =
        rows          ? (op == 13 ? MessageType::kRowPull : MessageType::kRowPush)
        : op == 7     ? MessageType::kRestore
        : replication ? static_cast<MessageType>(static_cast<int>(MessageType::kReplicate) + op - 9)
                      : static_cast<MessageType>(op);
    Message request = Request(in, type, id, server->global_step());
    if (replication) ReplicationFields(in, &request);
    if (rows) RowFields(in, &request);
    if (!ThroughTheWire(&request)) continue;
    const std::string peer = in.Pick(kPeers);
    // The connection's CURVE key ("" in plaintext), which may disagree with the header.
    const std::string identity = in.Pick(kIdentities);
    const Snapshot before = Take(*server);
    const int64_t step_before = server->global_step();
    const size_t peers_before = server->peers().size();
    const size_t pending_before = server->pending_requests();
    std::vector<ParameterServer::Outgoing> out = server->Handle(peer, request, identity);
    if (replication) {  // refused whatever it carries: this server has no chain
      CHECK_EQ(out.size(), 1u);
      CHECK(out[0].peer == peer && out[0].message.type == MessageType::kError)
          << "a " << wire::MessageTypeName(type) << " was answered OK";
      CheckSame(before, Take(*server), wire::MessageTypeName(type));
      CHECK_EQ(server->global_step(), step_before);
      CHECK_EQ(server->peers().size(), peers_before);
      CHECK_EQ(server->pending_requests(), pending_before);
    }
    for (const auto& o : out) {
      if (o.message.type != MessageType::kError ||
          o.message.error_code != StatusCode::kPermissionDenied || o.peer != peer) {
        continue;
      }
      CheckSame(before, Take(*server), "refused: '" + o.message.text + "'");
      CHECK_EQ(server->global_step(), step_before) << "refused: '" << o.message.text << "'";
    }
    if (request.type != MessageType::kHeartbeat && request.type != MessageType::kPull &&
        request.type != MessageType::kBarrier && request.type != MessageType::kRowPull &&
        (identity.rfind("evaluator", 0) == 0 || request.role == "evaluator") &&
        !(request.type == MessageType::kRegister && request.tensors.empty())) {
      for (const auto& o : out) {
        CHECK(o.peer != peer || o.message.type == MessageType::kError)
            << "an evaluator's " << wire::MessageTypeName(request.type) << " was answered OK";
      }
    }
    if (request.type == MessageType::kPull) {
      for (const auto& o : out) pulls += o.peer == peer && o.message.type == MessageType::kOk;
    }
    if (options.one_push_per_pull && options.mode == UpdateMode::kAsync &&
        request.type != MessageType::kRestore && request.type != MessageType::kRegister) {
      // At most one step per pull (a step's parts count down on one pull), and one first push
      // per peer name (a few roles and tasks).
      CHECK_LE(server->global_step() - first_step, pulls + 12)
          << "the global step moved by more pushes than pulls";
    }
    if (request.type == MessageType::kRestore || request.type == MessageType::kRegister) {
      pulls = 0;  // the step was set, not moved by pushes: count from here
      first_step = server->global_step();
    }
    for (auto& done : server->TakeFinishedCheckpoints(/*wait=*/true)) out.push_back(done);
    if ((request.type == MessageType::kPush || request.type == MessageType::kRowPush ||
         request.type == MessageType::kRowPull) &&
        out.size() == 1 && out[0].message.type == MessageType::kError) {
      CheckSame(before, Take(*server), "push refused with '" + out[0].message.text + "'");
    }
    if (rows) {
      CHECK_EQ(server->global_step(), step_before) << "a row request moved the global step";
      CHECK_LE(server->tables()->rows(), kTableRows);
    }
    if (request.type == MessageType::kCheckpoint && out.size() == 1 &&
        out[0].message.type == MessageType::kOk) {
      saved = true;
      saved_state = Take(*server);
      saved_step = request.step;
    }
  }
  return 0;
}
