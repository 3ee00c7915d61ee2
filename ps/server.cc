#include "ps/server.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <utility>

#include "common/checkpoint/cluster_checkpoint.h"
#include "ps/membership.h"
#include "ps/permissions.h"

namespace pstrain {
namespace ps {

using wire::Message;
using wire::MessageType;

namespace {
ServerOptions WithShard(ServerOptions o) {
  if (o.shard < 0) o.shard = o.task_index;
  if (o.cluster.servers == 0) o.cluster.servers = o.num_ps;  // ps-<t> senders
  return o;
}
}  // namespace

ParameterServer::ParameterServer(ServerOptions options, std::unique_ptr<VariableStore> store)
    : options_(WithShard(std::move(options))),
      store_(std::move(store)),
      policy_(UpdatePolicy::For(options_.mode, this, options_.max_staleness,
                                "ps " + std::to_string(options_.task_index))),
      barriers_(options_.cluster, options_.min_workers > 0),
      checkpoints_(std::make_unique<ShardCheckpoints>(ShardDir(), options_.max_to_keep,
                                                      "ps " + std::to_string(options_.task_index),
                                                      options_.before_checkpoint_write)),
      signature_(options_.keys),
      intake_(options_.shard),
      admission_(PushAdmissionOptions{"ps " + std::to_string(options_.task_index),
                                      options_.one_push_per_pull, options_.outlier_binades,
                                      policy_->TakesParts(), policy_->name()},
                 peers_) {
  membership_ = std::make_unique<Membership>(MembershipOptions{
      options_.mode, options_.num_workers, options_.backup_workers, options_.accumulate_n,
      options_.min_workers, options_.cluster.evaluators,
      "ps " + std::to_string(options_.task_index) + ": shard " + std::to_string(options_.shard)});
  StartDataLedger();
}

ParameterServer::~ParameterServer() = default;

std::string ParameterServer::ShardDir() const {
  return options_.train_dir + "/ps-" + std::to_string(options_.shard) + "-of-" +
         std::to_string(options_.num_ps);
}

std::string ParameterServer::Who(const Message& m) const {
  return m.role + " " + std::to_string(m.task_index);
}

int ParameterServer::required_pushes() const {
  std::vector<std::string> pushed;  // elastic sync: the window's pushers, whose replies wait
  if (membership_->elastic()) {
    for (const std::string& who : policy_->waiting_pushers()) pushed.push_back(WorkerName(who));
  }
  return membership_->RequiredPushes(peers_, pushed);
}

ReplySource ParameterServer::Source() const {
  return {options_.task_index, chain_.epoch(), reply_step()};
}

Message ParameterServer::FromThisServer(MessageType type) const {
  return FromServerTask(options_.task_index, type);
}

Message ParameterServer::Reply(const Message& request, MessageType type) const {
  return ReplyTo(request, type, Source());
}

Message ParameterServer::Error(const Message& request, const std::string& what, StatusCode code) {
  return ErrorTo(request, what, code, Source(), "ps-error");
}

Message ParameterServer::Refuse(const Message& request, const Status& why,
                                const std::string& identity) {
  ++stats_.refused;
  return RefusalTo(request, why, identity, Source());
}

Status ParameterServer::NotePeer(const std::string& who, const Message& request,
                                 std::chrono::steady_clock::time_point now) {
  const std::string me = "ps " + std::to_string(options_.task_index) + ": ";
  ASSIGN_OR_RETURN(bool another, AdmitPeer(&peers_, who, request, now, options_.peer_timeout, me));
  if (another) ReleaseDataLeases(who, /*restarted=*/true);
  return Status::OK();
}

int ParameterServer::CheckPeers(std::chrono::steady_clock::time_point now) {
  const std::vector<std::string> silent = FindSilentPeers(
      &peers_, now, options_.peer_timeout, "ps " + std::to_string(options_.task_index) + ": ");
  for (const std::string& who : silent) ReleaseDataLeases(who);
  return static_cast<int>(silent.size());
}

std::vector<ParameterServer::Outgoing> ParameterServer::Handle(const std::string& peer,
                                                               const Message& request,
                                                               const std::string& identity) {
  stats_.bytes_in += WireTensorBytes(request);
  std::vector<Outgoing> out = Dispatch(peer, request, identity);
  stats_.bytes_out += ReplyBytes(out);
  highs_.pending = std::max(highs_.pending, pending_requests());
  return out;
}

ServerHighs ParameterServer::TakeHighs() { return std::exchange(highs_, ServerHighs{}); }

std::vector<ParameterServer::Outgoing> ParameterServer::Dispatch(const std::string& peer,
                                                                 const Message& request,
                                                                 const std::string& identity) {
  Result<Sender> sender = IdentifySender(identity, request, options_.cluster);
  Status allowed = sender.ok() ? Authorize(*sender, request) : sender.status();
  const bool chain =
      request.type == MessageType::kReplicate || request.type == MessageType::kReplicaCopy;
  const bool beside_shard = chain || request.type == MessageType::kShardMap ||
                            (request.type == MessageType::kDataLease && ledger_ == nullptr);
  // A request carries only its type's fields: its struct on the wire has no place for others
  // (common/wire/codec.h), and every request comes off the wire.
  if (allowed.ok() && beside_shard) {
    // Server to server (ps/server_replication.cc), never through the peer table; the shard map
    // is the owning ServerTask's, data leases shard 0's with its ledger on.
    if (chain && options_.replicas > 0) {
      return request.type == MessageType::kReplicate ? HandleReplicate(peer, request)
                                                     : HandleReplicaCopy(peer, request);
    }
    allowed = FailedPrecondition("replication is not enabled on this server; it takes no " +
                                 std::string(wire::MessageTypeName(request.type)));
  }
  if (allowed.ok()) allowed = NotePeer(sender->Name(), request, std::chrono::steady_clock::now());
  if (!allowed.ok()) return {{peer, Refuse(request, allowed, identity)}};
  if (std::vector<Outgoing> out; NotTheHead(peer, request, &out)) return out;
  switch (request.type) {
    case MessageType::kRegister:
      return HandleInit(peer, request);
    case MessageType::kPull:
      return HandlePull(peer, request);
    case MessageType::kPush:
      return TakePush(peer, request, identity);
    case MessageType::kBarrier:
      return HandleBarrier(peer, request);
    case MessageType::kHeartbeat: {
      if (request.text == "goodbye" && peers_.count(Who(request))) {
        peers_[Who(request)].left = true;
        ReleaseDataLeases(Who(request));
        VLOG(1) << "ps " << options_.task_index << ": " << Who(request) << " said goodbye";
      }
      Message m = Reply(request, MessageType::kOk);
      m.value = initialized_ ? 1 : 0;
      return {{peer, m}};
    }
    case MessageType::kCheckpoint:
      return HandleCheckpoint(peer, request);
    case MessageType::kRestore: {
      std::vector<Outgoing> out = {{peer, HandleRestore(request)}};
      CopyToJoiners(&out);  // a restored tail's joiners copy the restored shard
      return out;
    }
    case MessageType::kDataLease:
      return HandleDataLease(peer, request);
    case MessageType::kRowPull:
    case MessageType::kRowPush:
      return HandleRows(peer, request);
    case MessageType::kShutdown: {
      shutdown_ = true;
      LOG(INFO) << "ps " << options_.task_index << ": shutdown requested by " << Who(request)
                << " at global step " << global_step_;
      return {{peer, Reply(request, MessageType::kOk)}};
    }
    default:
      return {{peer, Error(request, std::string("unexpected request type ") +
                                        wire::MessageTypeName(request.type))}};
  }
}

// The chief's register carries the initial values of this server's partitions; anyone else's
// register just asks whether the variables are ready. The reply lists the steps this shard holds
// whole (common/checkpoint/cluster_checkpoint.h), for the chief to pick one to restore.
std::vector<ParameterServer::Outgoing> ParameterServer::HandleInit(const std::string& peer,
                                                                   const Message& request) {
  if (request.tensors.empty()) {
    Message m = Reply(request, MessageType::kOk);
    m.value = initialized_ ? 1 : 0;
    m.steps = checkpoints_->WholeSteps();
    return {{peer, m}};
  }
  if (initialized_) {
    // Restored (or initialised by an earlier chief): the values stay; the layout must agree.
    for (const auto& t : request.tensors) {
      if (!store_->Has(t.name) || store_->Value(t.name).shape() != t.tensor.shape()) {
        return {{peer, Error(request, "variable '" + t.name + "' " + t.tensor.shape().ToString() +
                                          " does not match this server's shard")}};
      }
    }
    Message m = Reply(request, MessageType::kOk);
    m.value = 1;
    m.text = "kept";
    return {{peer, m}};
  }
  std::set<std::string> names;
  for (const auto& t : request.tensors) {
    if (!names.insert(t.name).second) {
      return {{peer, Error(request, "the register names variable '" + t.name + "' twice")}};
    }
  }
  for (const auto& t : request.tensors) {
    // A copy: the received tensor lives in a network frame that is released after this call.
    Status s = store_->AddVariable(t.name, t.tensor.Clone());
    if (!s.ok()) return {{peer, Error(request, s.message())}};
  }
  policy_->Reset(*store_);
  global_step_ = request.step;
  initialized_ = true;
  chain_.Reset(0, global_step_);
  const std::string slots = RestoreSlots(request.step) + RestoreTables(request.step);
  LOG(INFO) << "ps " << options_.task_index << ": initialised " << request.tensors.size()
            << " variables from " << Who(request) << " at global step " << global_step_ << " ("
            << slots << ")";
  Message m = Reply(request, MessageType::kOk);
  m.value = 1;
  m.text = "initialised";
  std::vector<Outgoing> out = {{peer, m}};
  CopyToJoiners(&out);
  return out;
}

std::vector<ParameterServer::Outgoing> ParameterServer::HandlePull(const std::string& peer,
                                                                   const Message& request) {
  if (!initialized_) {
    return {{peer, Error(request,
                         "variables are not initialised yet (waiting for the chief, "
                         "worker 0)",
                         StatusCode::kUninitialized)}};
  }
  if (auto it = peers_.find(Who(request)); it != peers_.end()) NotePull(&it->second);
  if (policy_->HoldPull(peer, request)) return {};
  return {{peer, PullReply(request)}};
}

Message ParameterServer::PullReply(const Message& request) {
  Message m = Reply(request, MessageType::kOk);
  const std::vector<std::string> names = request.names.empty() ? store_->Names() : request.names;
  for (const std::string& name : names) {
    if (!store_->Has(name)) return Error(request, "no variable named '" + name + "'");
    // Shared, not copied: an update while the send is in flight writes to another buffer. In
    // bfloat16 if asked (--push_dtype=bf16): the worker's copy is the float32 master rounded.
    m.tensors.push_back({name, store_->Value(name), request.pull_dtype});
  }
  ++stats_.pulls;
  return m;
}

// A push's life on the server: not before initialisation; its fields, a retry answered from the
// cache, its contents (ps/push_admission.h); its data uses; the outlier guard; the values it
// assigns; then the update policy's part: applied now (async) or added to the window.
std::vector<ParameterServer::Outgoing> ParameterServer::HandlePush(const std::string& peer,
                                                                   const Message& request) {
  if (!initialized_) {
    return {{peer, Error(request, "variables are not initialised yet (waiting for the chief)",
                         StatusCode::kUninitialized)}};
  }
  PushVerdict push = admission_.Check(*store_, request);
  if (push.kind == PushVerdict::Kind::kRetry) return AnswerRetry(peer, request, push);
  if (push.kind == PushVerdict::Kind::kRefuse) {
    ++stats_.rejected;
    return {{peer, Error(request, push.why.message())}};
  }
  if (Status s = RecordDataUses(request); !s.ok()) {
    return {{peer, Error(request, s.message(), s.code())}};  // a revoked lease: kAborted
  }
  ++stats_.pushes;
  if (admission_.ScaleOutlier(request, &push.contents)) ++stats_.scaled_outliers;
  for (const auto& [name, value] : push.contents.assigns) store_->Assign(name, value);
  std::vector<Outgoing> out;
  policy_->Take(peer, request, push.contents, &out);
  return out;
}

void ParameterServer::Commit(Update update, std::vector<HeldReply> replies,
                             const std::vector<std::string>& pushers, std::vector<Outgoing>* out) {
  if (!chain_.active()) {
    for (HeldReply& h : replies) out->push_back({h.peer, std::move(h.message)});
    return;
  }
  const int64_t record = Replicate(update.step, std::move(update.prepared),
                                   std::move(update.assigns), std::move(update.pushes), out);
  for (const std::string& who : pushers) peers_[who].last_push_record = record;
  for (HeldReply& h : replies) HoldUntil(record, h.peer, h.message, out);
}

Status ParameterServer::Apply(int64_t step, const NamedTensors& grads,
                              VariableStore::Checked checked, NamedTensors* prepared) {
  const auto start = std::chrono::steady_clock::now();
  // A pull reply still being sent, or a checkpoint being written, keeps the values it was given.
  Status s = [&]() -> Status {
    ASSIGN_OR_RETURN(NamedTensors ready, store_->PrepareGradients(grads, checked));
    RETURN_IF_ERROR(store_->ApplyPrepared(step, ready, VariableStore::Holders::kKeepTheirBytes));
    if (prepared != nullptr) *prepared = std::move(ready);
    return Status::OK();
  }();
  const int64_t nanos =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  stats_.apply_nanos += nanos;
  highs_.apply_nanos = std::max(highs_.apply_nanos, nanos);
  return s;
}

void ParameterServer::CountUpdate() {
  ++global_step_;
  ++stats_.updates;
}

void ParameterServer::NoteStaleness(int64_t computed_at) {
  const int64_t staleness = std::max<int64_t>(0, global_step_ - computed_at);
  stats_.staleness_sum += staleness;
  ++stats_.staleness_samples;
  highs_.staleness = std::max(highs_.staleness, staleness);
}

std::vector<ParameterServer::Outgoing> ParameterServer::TakePush(const std::string& peer,
                                                                 const Message& request,
                                                                 const std::string& identity) {
  if (Status paced = admission_.Pace(request, IsHeld(request)); !paced.ok()) {
    return {{peer, Refuse(request, paced, identity)}};
  }
  const size_t held = held_pushes_.size();
  const int64_t taken = stats_.pushes;
  std::vector<Outgoing> out;
  if (!HoldPush(peer, request, &out)) {
    membership_->NotePush(policy_->window_empty(), peers_);
    out = HandlePush(peer, request);
  }
  if (held_pushes_.size() > held || stats_.pushes > taken)
    NotePushTaken(&peers_[Who(request)], request);
  return out;
}

std::vector<ParameterServer::Outgoing> ParameterServer::AnswerRetry(const std::string& peer,
                                                                    const Message& request,
                                                                    const PushVerdict& retry) {
  ++stats_.duplicates;
  std::vector<Outgoing> out;
  if (policy_->HoldRetry(peer, request)) return out;  // sync: answered with the original
  Message m = retry.reply;
  m.step = reply_step();
  m.map_epoch = chain_.epoch();
  if (chain_.active() && retry.record == -1) {  // in the open accumulate window
    policy_->AnswerWithWindow(peer, m);
  } else if (chain_.active() && retry.record > chain_.committed()) {
    HoldUntil(retry.record, peer, m, &out);  // answered once its record is acknowledged
  } else {
    out.push_back({peer, m});
  }
  return out;
}

void ParameterServer::RememberPush(const Message& request, const Message& reply, bool in_window) {
  auto it = peers_.find(Who(request));
  if (it == peers_.end()) return;
  it->second.last_push_sequence = request.sequence;
  it->second.last_push_reply = reply;
  if (in_window && chain_.active()) it->second.last_push_record = -1;
}

size_t ParameterServer::pending_requests() const {
  size_t n = policy_->pending() + held_pushes_.size() + chain_.held() + intake_.waiting();
  return n + barriers_.waiting();
}

std::vector<ParameterServer::Outgoing> ParameterServer::HandleBarrier(const std::string& peer,
                                                                      const Message& request) {
  Result<std::vector<Barriers::Wait>> released = barriers_.Arrive(
      peer, request, [this](const std::vector<Barriers::Wait>& w) { return BarrierComplete(w); });
  if (!released.ok()) {
    ++stats_.rejected;
    return {{peer, Error(request, released.status().message(), released.status().code())}};
  }
  std::vector<Outgoing> out;
  AnswerReleased(std::move(released).value(), &out);
  return out;
}

void ParameterServer::AnswerReleased(std::vector<Barriers::Wait> released,
                                     std::vector<Outgoing>* out) const {
  for (Barriers::Wait& w : released) {
    out->push_back({std::move(w.peer), Reply(w.request, MessageType::kOk)});
  }
}

}  // namespace ps
}  // namespace pstrain
