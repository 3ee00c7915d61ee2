#include "worker/distributed/ps_client.h"

#include <cstring>
#include <map>
#include <utility>

#include "common/checkpoint/cluster_checkpoint.h"
#include "common/wire/same_host.h"
#include "worker/distributed/shard_master.h"
#include "worker/distributed/tf_checkpoint_writer.h"

namespace pstrain {
namespace worker {

using std::chrono::milliseconds;
using wire::Message;
using wire::MessageType;

namespace {
// Committed steps the record remembers: more than a shard keeps by default (--max_to_keep 5); a
// step whose files are gone is simply not restorable.
constexpr int kCommitsKept = 20;

// Rows [begin, end) of `t` as a tensor sharing its buffer.
Tensor Rows(const Tensor& t, const replication::Partition& p) {
  if (p.row_begin == 0 && p.row_end == (t.shape().rank() ? t.dim(0) : 1)) return t;
  const int64_t row = t.size() / t.dim(0);
  Tensor keep = t;
  return Tensor::Wrap(p.shape, const_cast<float*>(t.data()) + p.row_begin * row, [keep] {});
}
}  // namespace

Result<std::unique_ptr<PsClient>> PsClient::Connect(const std::vector<std::string>& ps_hosts,
                                                    const std::string& role, int task_index,
                                                    const std::vector<Variable*>& variables,
                                                    int64_t partition_bytes,
                                                    const wire::ClusterKeys& curve, int replicas) {
  if (replicas != 0) {
    // The same checks, by name, as every other role's.
    RETURN_IF_ERROR(replication::PlaceReplicas(ps_hosts, replicas).status());
  }
  auto c = std::unique_ptr<PsClient>(new PsClient());
  c->role_ = role;
  c->task_index_ = task_index;
  c->variables_ = variables;
  std::vector<replication::VariableSpec> specs;
  for (Variable* v : variables) specs.push_back({v->name, v->value.shape()});
  ASSIGN_OR_RETURN(c->sharding_, replication::Sharding::Compute(
                                     specs, static_cast<int>(ps_hosts.size()), partition_bytes));
  // Every connection to server s (heartbeats too) trusts ps task s's public key with --curve_keys;
  // one on this host is reached over its same-host socket (common/wire/same_host.h).
  const auto connect = [ps_hosts, curve](int s) -> Result<std::unique_ptr<wire::Connection>> {
    ASSIGN_OR_RETURN(wire::ServerRoute route, wire::RouteToServer(curve, s, ps_hosts[s]));
    return wire::Connection::Connect(route.endpoint, {}, route.security);
  };
  std::vector<std::unique_ptr<wire::Connection>> servers;
  for (size_t s = 0; s < ps_hosts.size(); ++s) {
    ASSIGN_OR_RETURN(auto conn, connect(static_cast<int>(s)));
    servers.push_back(std::move(conn));
  }
  c->hosts_ = ps_hosts;
  c->curve_ = curve;
  c->push_sequence_.assign(ps_hosts.size(), 0);
  c->routes_ = std::make_unique<ShardRoutes>(static_cast<int>(ps_hosts.size()), replicas, role,
                                             task_index, connect, MapCheckOf(curve));
  c->heartbeat_ = std::make_unique<HeartbeatMonitor>(ps_hosts, role, task_index, connect);
  RequestRouter::Options options;
  options.who = c->Who();
  options.hosts = ps_hosts;
  if (role == "chief") {  // a server that lost its variables gets this chief's, as of the last pull
    options.reinit = [client = c.get()](int shard) {
      return client->InitMessage(shard, client->last_step_);
    };
  }
  c->router_ = std::make_unique<RequestRouter>(std::move(servers), c->heartbeat_.get(),
                                               c->routes_.get(), std::move(options));
  RETURN_IF_ERROR(c->heartbeat_->Start());
  return c;
}

Message PsClient::Request(MessageType type) const {
  Message m;
  m.type = type;
  m.role = role_;
  m.task_index = task_index_;
  m.incarnation = wire::ProcessIncarnation();
  return m;
}

Result<std::vector<Message>> PsClient::ExchangeWithShards(
    std::vector<std::pair<int, Message>> requests) {
  for (auto& [task, m] : requests) {
    m.role = role_;
    m.task_index = task_index_;
    m.incarnation = wire::ProcessIncarnation();
  }
  return router_->Exchange(requests, kStepTimeout);
}

Message PsClient::StepPull(const std::vector<replication::Partition>& partitions) const {
  Message pull = Request(MessageType::kPull);
  for (const replication::Partition& p : partitions) pull.names.push_back(p.key);
  pull.pull_dtype = push_dtype_;
  return pull;
}

PsClient::PsClient() = default;
PsClient::~PsClient() {
  for (size_t s = 0; s < acknowledged_steps_.size(); ++s) {
    LOG(INFO) << Who() << ": shard " << s << ": " << acknowledged_steps_[s]
              << " pushes acknowledged";
  }
}

void PsClient::NoteStepAcknowledged(int64_t global_step) {
  if (global_step < last_step_) {
    LOG(ERROR) << Who() << ": the global step went back from " << last_step_ << " to "
               << global_step << " (an acknowledged update was lost)";
  }
  last_step_ = global_step;
  acknowledged_steps_.resize(num_servers(), 0);
  for (int s = 0; s < num_servers(); ++s) {
    if (!sharding_.OnTask(s).empty()) ++acknowledged_steps_[s];
  }
}

Message PsClient::InitMessage(int s, int64_t step) const {
  Message m = Request(MessageType::kRegister);
  m.step = step;
  for (const replication::Partition& p : sharding_.OnTask(s)) {
    for (Variable* v : variables_) {
      if (v->name == p.variable) m.tensors.push_back({p.key, Rows(v->value, p)});
    }
  }
  return m;
}

Status PsClient::CopyIn(const std::vector<Message>& replies) {
  std::map<std::string, std::pair<const Tensor*, int>> received;  // and the answering task
  for (const Message& r : replies) {
    for (const auto& t : r.tensors) received[t.name] = {&t.tensor, r.task_index};
  }
  for (const replication::Partition& p : sharding_.partitions()) {
    auto it = received.find(p.key);
    if (it == received.end()) continue;
    const auto& [got, task] = it->second;
    // Checked before any copy: a server that holds another partitioning (a checkpoint written
    // with other --partition_bytes, --replicas or servers) or a hostile one must not make this
    // worker read past the tensor it sent.
    if (got->shape() != p.shape) {
      return FailedPrecondition(
          "ps " + std::to_string(task) + " answered a pull of '" + p.key + "' with shape " +
          got->shape().ToString() + "; this worker's partition is " + p.shape.ToString() +
          ": the servers hold the variables split another way (a checkpoint in --train_dir from "
          "a run with other --partition_bytes, --replicas or --ps_hosts? --replicas, or 6 or "
          "more servers since 2026-11-28, make the default 1 MiB, else 8 MiB)");
    }
  }
  for (const replication::Partition& p : sharding_.partitions()) {
    auto it = received.find(p.key);
    if (it == received.end()) continue;
    for (Variable* v : variables_) {
      if (v->name != p.variable) continue;
      Tensor dst = Rows(v->value, p);
      std::memcpy(dst.data(), it->second.first->data(), dst.bytes());
    }
  }
  return Status::OK();
}

Result<int64_t> PsClient::Pull() {
  std::vector<std::pair<int, Message>> out;
  for (size_t s = 0; s < hosts_.size(); ++s) {
    out.emplace_back(static_cast<int>(s), Request(MessageType::kPull));
  }
  ASSIGN_OR_RETURN(std::vector<Message> replies, router_->Exchange(out, kShortTimeout));
  RETURN_IF_ERROR(CopyIn(replies));
  last_step_ = replies[0].step;
  return replies[0].step;
}

Message PsClient::PushOf(int s, const std::vector<replication::Partition>& partitions,
                         int64_t step) {
  Message push = Request(MessageType::kPush);
  push.step = step;
  push.sequence = ++push_sequence_[s];
  if (s == 0) push.uses = std::exchange(data_uses_, {});  // elastic data: one part carries them
  for (const replication::Partition& p : partitions) {
    for (Variable* v : variables_) {
      if (v->name != p.variable) continue;
      if (v->trainable && push_dtype_ == wire::TensorDType::kBfloat16) {
        // Each partition is pushed once a step (a retry resends this message), so its residual
        // moves once.
        push.tensors.push_back(
            {p.key, error_feedback_.Round(p.key, Rows(v->grad, p)), wire::TensorDType::kBfloat16});
      } else if (v->trainable) {
        push.tensors.push_back({p.key, Rows(v->grad, p)});
      } else {
        push.tensors.push_back({p.key, Rows(v->value, p)});
        push.assigns.push_back(p.key);  // a value to assign, not a gradient
      }
    }
  }
  return push;
}

Result<PushPullResult> PsClient::PushAndPull(int64_t step) {
  std::vector<std::pair<int, Message>> out;
  for (size_t s = 0; s < hosts_.size(); ++s) {
    const int server = static_cast<int>(s);
    out.emplace_back(server, PushOf(server, sharding_.OnTask(server), step));
  }
  for (size_t s = 0; s < hosts_.size(); ++s) out.emplace_back(static_cast<int>(s), StepPull());
  ASSIGN_OR_RETURN(std::vector<Message> replies, router_->Exchange(out, kStepTimeout));
  PushPullResult result;
  for (size_t s = 0; s < hosts_.size(); ++s) result.dropped |= replies[s].value < 0;
  std::vector<Message> pulls(replies.begin() + hosts_.size(), replies.end());
  RETURN_IF_ERROR(CopyIn(pulls));
  result.global_step = pulls[0].step;
  NoteStepAcknowledged(result.global_step);
  return result;
}

Status PsClient::Barrier(const std::string& name, int participants) {
  Message m = Request(MessageType::kBarrier);
  m.text = name;
  m.value = participants;
  return router_->Exchange({{0, m}}, milliseconds(3600 * 1000)).status();
}

Status PsClient::Checkpoint(int64_t step, const std::string& train_dir) {
  // A step saved again is not committed until every shard has written it again.
  if (!train_dir.empty()) RETURN_IF_ERROR(UncommitStepsAfter(train_dir, step - 1));
  std::vector<std::pair<int, Message>> out;
  for (size_t s = 0; s < hosts_.size(); ++s) {
    Message m = Request(MessageType::kCheckpoint);
    m.step = step;
    m.text = train_dir;
    out.emplace_back(static_cast<int>(s), m);
  }
  // Servers answer once their file is durable; they go on serving while they write it.
  RETURN_IF_ERROR(router_->Exchange(out, kStepTimeout).status());
  if (train_dir.empty()) return Status::OK();
  RETURN_IF_ERROR(CommitStep(train_dir, step, kCommitsKept));
  LOG(INFO) << Who() << ": committed the checkpoint of step " << step << " (" << hosts_.size()
            << " shards) in " << CommitRecordPath(train_dir);
  AfterCheckpointCommitted(train_dir, step);  // --tf_checkpoints
  return Status::OK();
}

Status PsClient::Shutdown() {
  std::vector<std::pair<int, Message>> out;
  for (size_t s = 0; s < hosts_.size(); ++s) {
    out.emplace_back(static_cast<int>(s), Request(MessageType::kShutdown));
  }
  if (master_) master_->Stop();  // the servers leave: no map to keep
  return router_->Exchange(out, kShortTimeout, /*to_tasks=*/true).status();
}

}  // namespace worker
}  // namespace pstrain
