#include "ps/server.h"

#include <algorithm>
#include <sstream>

#include "common/checkpoint/checkpoint_manager.h"
#include "common/checkpoint/partial_restore.h"

namespace pstrain {
namespace ps {

using wire::Message;
using wire::MessageType;

Result<UpdateMode> ParseUpdateMode(const std::string& name) {
  if (name == "async") return UpdateMode::kAsync;
  if (name == "accumulate") return UpdateMode::kAccumulate;
  if (name == "sync") return UpdateMode::kSync;
  return InvalidArgument("--update_mode must be async, accumulate or sync, got '" + name + "'");
}

ParameterServer::ParameterServer(ServerOptions options, std::unique_ptr<VariableStore> store)
    : options_(std::move(options)), store_(std::move(store)) {}

std::string ParameterServer::ShardDir() const {
  return options_.train_dir + "/ps-" + std::to_string(options_.task_index) + "-of-" +
         std::to_string(options_.num_ps);
}

std::string ParameterServer::Who(const Message& m) const {
  return m.role + " " + std::to_string(m.task_index);
}

int ParameterServer::required_pushes() const {
  if (options_.mode == UpdateMode::kSync) {
    return std::max(1, options_.num_workers - options_.backup_workers);
  }
  return options_.accumulate_n > 0 ? options_.accumulate_n : options_.num_workers;
}

Message ParameterServer::Reply(const Message& request, MessageType type) const {
  Message m;
  m.type = type;
  m.request_id = request.request_id;
  m.role = "ps";
  m.task_index = options_.task_index;
  m.step = global_step_;
  m.incarnation = wire::ProcessIncarnation();
  return m;
}

Message ParameterServer::Error(const Message& request, const std::string& what, StatusCode code) {
  Message m = Reply(request, MessageType::kError);
  m.text = "ps " + std::to_string(options_.task_index) + ": " + what;
  m.error_code = code;
  LOG(WARNING) << m.text << " (request " << wire::MessageTypeName(request.type) << " from "
               << Who(request) << ")";
  return m;
}

Status ParameterServer::RestoreIfPresent() {
  CheckpointManager manager(ShardDir(), options_.max_to_keep);
  if (!manager.LatestPath().ok()) return Status::OK();
  ASSIGN_OR_RETURN(CheckpointData data, manager.RestoreLatest());
  auto it = data.metadata.find("variables");
  if (it == data.metadata.end()) {
    return DataLoss(ShardDir() + ": checkpoint lists no variables (metadata 'variables')");
  }
  std::stringstream names(it->second);
  for (std::string name; std::getline(names, name, ',');) {
    auto t = data.tensors.find(name);
    if (t == data.tensors.end()) {
      return DataLoss(ShardDir() + ": checkpoint lacks variable '" + name + "'");
    }
    RETURN_IF_ERROR(store_->AddVariable(name, t->second.Clone()));
    accumulators_.emplace(
        name, GradientAccumulator(t->second.shape(), required_pushes(), options_.max_staleness));
  }
  std::map<std::string, Tensor> state = store_->StateTensors();
  ASSIGN_OR_RETURN(RestoreReport report, RestoreInto(data, RestoreFilter{}, &state));
  global_step_ = data.global_step;
  initialized_ = true;
  LOG(INFO) << "ps " << options_.task_index << ": restored " << report.restored.size()
            << " tensors of its shard at global step " << global_step_ << " from " << ShardDir();
  return Status::OK();
}

void ParameterServer::NotePeer(const Message& request, std::chrono::steady_clock::time_point now) {
  if (request.role.empty() || request.task_index < 0) return;  // not a role (e.g. a probe)
  const std::string who = Who(request);
  const std::string me = "ps " + std::to_string(options_.task_index) + ": ";
  auto [it, is_new] = peers_.try_emplace(who);
  PeerState& p = it->second;
  if (!is_new && p.missing) {
    const double silent = std::chrono::duration<double>(now - p.last_seen).count();
    LOG(WARNING) << me << who << " is back after " << silent << " s of silence";
  }
  if (!is_new && request.incarnation != 0 && p.incarnation != 0 &&
      request.incarnation != p.incarnation) {
    LOG(WARNING) << me << who << " restarted (a new process since its last request)";
    p.last_push_sequence = 0;
  }
  if (request.incarnation != 0) p.incarnation = request.incarnation;
  p.last_seen = now;
  p.missing = false;
  p.left = false;
}

int ParameterServer::CheckPeers(std::chrono::steady_clock::time_point now) {
  int found = 0;
  for (auto& [who, p] : peers_) {
    if (p.missing || p.left || now - p.last_seen <= options_.peer_timeout) continue;
    p.missing = true;
    ++found;
    LOG(WARNING) << "ps " << options_.task_index << ": " << who << " has sent nothing for "
                 << std::chrono::duration<double>(now - p.last_seen).count()
                 << " s (heartbeats are due every second): presumed dead";
  }
  return found;
}

std::vector<ParameterServer::Outgoing> ParameterServer::Handle(const std::string& peer,
                                                               const Message& request) {
  NotePeer(request, std::chrono::steady_clock::now());
  switch (request.type) {
    case MessageType::kRegister:
      return HandleInit(peer, request);
    case MessageType::kPull:
      return HandlePull(peer, request);
    case MessageType::kPush:
      return HandlePush(peer, request);
    case MessageType::kBarrier:
      return HandleBarrier(peer, request);
    case MessageType::kHeartbeat: {
      if (request.text == "goodbye" && peers_.count(Who(request))) {
        peers_[Who(request)].left = true;
        VLOG(1) << "ps " << options_.task_index << ": " << Who(request) << " said goodbye";
      }
      Message m = Reply(request, MessageType::kOk);
      m.value = initialized_ ? 1 : 0;
      return {{peer, m}};
    }
    case MessageType::kCheckpoint:
      return HandleCheckpoint(peer, request);
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
// register just asks whether the variables are ready.
std::vector<ParameterServer::Outgoing> ParameterServer::HandleInit(const std::string& peer,
                                                                   const Message& request) {
  if (request.tensors.empty()) {
    Message m = Reply(request, MessageType::kOk);
    m.value = initialized_ ? 1 : 0;
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
  for (const auto& t : request.tensors) {
    if (store_->Has(t.name)) return {{peer, Error(request, "variable '" + t.name + "' twice")}};
  }
  for (const auto& t : request.tensors) {
    // A copy: the received tensor lives in a network frame that is released after this call.
    Status s = store_->AddVariable(t.name, t.tensor.Clone());
    if (!s.ok()) return {{peer, Error(request, s.message())}};
    accumulators_.emplace(
        t.name, GradientAccumulator(t.tensor.shape(), required_pushes(), options_.max_staleness));
  }
  global_step_ = request.step;
  initialized_ = true;
  LOG(INFO) << "ps " << options_.task_index << ": initialised " << request.tensors.size()
            << " variables from " << Who(request) << " at global step " << global_step_;
  Message m = Reply(request, MessageType::kOk);
  m.value = 1;
  m.text = "initialised";
  return {{peer, m}};
}

std::vector<ParameterServer::Outgoing> ParameterServer::HandlePull(const std::string& peer,
                                                                   const Message& request) {
  if (!initialized_) {
    return {{peer, Error(request,
                         "variables are not initialised yet (waiting for the chief, "
                         "worker 0)",
                         StatusCode::kFailedPrecondition)}};
  }
  if (options_.mode == UpdateMode::kSync) {
    // In lockstep a pull that follows its sender's own push waits for that update.
    for (const Waiting& w : waiting_pushes_) {
      if (w.peer == peer) {
        waiting_pulls_.push_back({peer, request});
        return {};
      }
    }
  }
  return {{peer, PullReply(request)}};
}

Message ParameterServer::PullReply(const Message& request) {
  Message m = Reply(request, MessageType::kOk);
  const std::vector<std::string> names = request.names.empty() ? store_->Names() : request.names;
  for (const std::string& name : names) {
    if (!store_->Has(name)) return Error(request, "no variable named '" + name + "'");
    // Shared, not copied: an update while the send is in flight detaches first.
    m.tensors.push_back({name, store_->Value(name)});
  }
  ++stats_.pulls;
  return m;
}

std::vector<ParameterServer::Outgoing> ParameterServer::HandlePush(const std::string& peer,
                                                                   const Message& request) {
  if (!initialized_) {
    return {{peer, Error(request, "variables are not initialised yet (waiting for the chief)",
                         StatusCode::kFailedPrecondition)}};
  }
  std::vector<Outgoing> out;
  if (IsRetriedPush(peer, request, &out)) return out;
  // `names` lists the pushed tensors that are values to assign (batch-norm moving statistics),
  // not gradients. Everything is checked before anything changes.
  std::vector<std::pair<std::string, Tensor>> grads, assigns;
  if (request.step < 0) {  // the optimizer would refuse it after the assigns below
    ++stats_.rejected;
    return {{peer, Error(request, "push computed from step " + std::to_string(request.step) +
                                      "; steps are >= 0")}};
  }
  for (const auto& t : request.tensors) {
    Status s = store_->CheckGradient(t.name, t.tensor);
    if (!s.ok()) {
      ++stats_.rejected;
      return {{peer, Error(request, s.message())}};
    }
    const bool assign =
        std::find(request.names.begin(), request.names.end(), t.name) != request.names.end();
    (assign ? assigns : grads).emplace_back(t.name, t.tensor);
  }
  ++stats_.pushes;
  for (const auto& [name, value] : assigns) {
    store_->DetachIfShared(name);
    Tensor dst = store_->Value(name);
    dst.CopyFrom(value);
  }
  if (options_.mode == UpdateMode::kAsync) {
    for (const auto& g : grads) store_->DetachIfShared(g.first);
    Status s = store_->ApplyGradientsAt(request.step, grads);
    if (!s.ok()) return {{peer, Error(request, s.message())}};
    ++global_step_;
    ++stats_.updates;
    out.push_back({peer, Reply(request, MessageType::kOk)});
    RememberPush(request, out.back().message);
    return out;
  }
  if (request.step < global_step_ - options_.max_staleness) {
    ++stats_.dropped_stale;
    Message m = Reply(request, MessageType::kOk);
    m.value = -1;  // dropped
    m.text = "stale: computed from step " + std::to_string(request.step) + ", now at " +
             std::to_string(global_step_) + " (max_staleness " +
             std::to_string(options_.max_staleness) + ")";
    VLOG(1) << "ps " << options_.task_index << ": dropped a " << m.text << " push from "
            << Who(request);
    RememberPush(request, m);
    return {{peer, m}};
  }
  for (const auto& g : grads) {
    accumulators_.at(g.first).Add(g.second, request.step, global_step_);
  }
  RememberPush(request, Reply(request, MessageType::kOk));
  if (options_.mode == UpdateMode::kSync) {
    waiting_pushes_.push_back({peer, request});
  } else {
    out.push_back({peer, Reply(request, MessageType::kOk)});
  }
  if (++pushes_in_window_ >= required_pushes()) {
    std::vector<std::pair<std::string, Tensor>> means;
    for (auto& [name, acc] : accumulators_) {
      if (acc.count() > 0) means.emplace_back(name, acc.TakeAverage());
    }
    for (const auto& g : means) store_->DetachIfShared(g.first);
    Status s = store_->ApplyGradientsAt(global_step_, means);
    if (!s.ok()) LOG(ERROR) << "ps " << options_.task_index << ": " << s.ToString();
    pushes_in_window_ = 0;
    ++global_step_;
    ++stats_.updates;
    for (Waiting& w : waiting_pushes_) out.push_back({w.peer, Reply(w.request, MessageType::kOk)});
    for (Waiting& w : waiting_pulls_) out.push_back({w.peer, PullReply(w.request)});
    waiting_pushes_.clear();
    waiting_pulls_.clear();
  }
  return out;
}

bool ParameterServer::IsRetriedPush(const std::string& peer, const Message& request,
                                    std::vector<Outgoing>* out) {
  if (request.sequence == 0) return false;  // the sender does not number its pushes
  auto it = peers_.find(Who(request));
  if (it == peers_.end()) return false;
  const PeerState& p = it->second;
  if (p.incarnation != request.incarnation || request.sequence > p.last_push_sequence) {
    return false;
  }
  ++stats_.duplicates;
  LOG(WARNING) << "ps " << options_.task_index << ": push " << request.sequence << " from "
               << Who(request) << " (step " << request.step
               << ") is a retry of one already applied; not applied again";
  if (options_.mode == UpdateMode::kSync) {
    for (const Waiting& w : waiting_pushes_) {
      if (Who(w.request) == Who(request) && w.request.sequence == request.sequence) {
        waiting_pushes_.push_back({peer, request});  // answered with the original
        return true;
      }
    }
  }
  Message m = p.last_push_reply;
  m.request_id = request.request_id;
  m.step = global_step_;
  out->push_back({peer, m});
  return true;
}

void ParameterServer::RememberPush(const Message& request, const Message& reply) {
  if (request.sequence == 0) return;
  auto it = peers_.find(Who(request));
  if (it == peers_.end()) return;
  it->second.last_push_sequence = request.sequence;
  it->second.last_push_reply = reply;
}

std::vector<ParameterServer::Outgoing> ParameterServer::HandleBarrier(const std::string& peer,
                                                                      const Message& request) {
  auto& waiting = barriers_[request.text];
  // A participant that asks again (a retry, or a restarted process) counts once; senders that
  // do not name themselves are told apart by connection.
  auto same = [&](const Waiting& w) {
    if (request.role.empty() || request.task_index < 0) return w.peer == peer;
    return Who(w.request) == Who(request);
  };
  waiting.erase(std::remove_if(waiting.begin(), waiting.end(), same), waiting.end());
  waiting.push_back({peer, request});
  std::vector<Outgoing> out;
  if (static_cast<int64_t>(waiting.size()) >= request.value) {
    for (Waiting& w : waiting) out.push_back({w.peer, Reply(w.request, MessageType::kOk)});
    barriers_.erase(request.text);
  }
  return out;
}

std::vector<ParameterServer::Outgoing> ParameterServer::HandleCheckpoint(const std::string& peer,
                                                                         const Message& request) {
  if (!initialized_) {
    return {{peer, Error(request, "nothing to save: not initialised",
                         StatusCode::kFailedPrecondition)}};
  }
  CheckpointData data;
  data.global_step = request.step;
  data.tensors = store_->StateTensors();
  std::string names;
  for (const std::string& n : store_->Names()) names += (names.empty() ? "" : ",") + n;
  data.metadata["variables"] = names;
  data.metadata["ps_task"] = std::to_string(options_.task_index);
  CheckpointManager manager(ShardDir(), options_.max_to_keep);
  Result<std::string> path = manager.Save(data);
  if (!path.ok()) return {{peer, Error(request, path.status().ToString())}};
  Message m = Reply(request, MessageType::kOk);
  m.text = path.value();
  return {{peer, m}};
}

Status ParameterServer::Serve(wire::ServerSocket* socket) {
  LOG(INFO) << "ps " << options_.task_index << ": serving on " << socket->endpoint();
  auto next_peer_check = std::chrono::steady_clock::now();
  while (!shutdown_) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_peer_check) {
      CheckPeers(now);
      next_peer_check = now + std::chrono::milliseconds(500);
    }
    Result<wire::Incoming> in = socket->Receive(std::chrono::milliseconds(200));
    if (!in.ok()) {
      if (in.status().code() == StatusCode::kUnavailable) continue;  // timeout
      return in.status();
    }
    std::vector<Outgoing> out;
    if (!in->message.ok()) {
      ++stats_.rejected;
      Message bad;  // the message could not be read, but its header may name the request
      bad.request_id = in->request_id;
      out.push_back(
          {in->peer, Error(bad, "malformed message refused: " + in->message.status().message())});
    } else {
      out = Handle(in->peer, in->message.value());
    }
    for (const Outgoing& o : out) {
      Status s = socket->Reply(o.peer, o.message);
      if (!s.ok())
        LOG(WARNING) << "ps " << options_.task_index << ": reply failed: " << s.ToString();
    }
  }
  // Drain: answer late requests for a moment (so that they fail fast, by name) and give
  // ZeroMQ's I/O thread time to deliver the shutdown reply before the process exits.
  const auto drain_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  while (std::chrono::steady_clock::now() < drain_end) {
    Result<wire::Incoming> in = socket->Receive(std::chrono::milliseconds(100));
    if (!in.ok() || !in->message.ok()) continue;
    Status s =
        socket->Reply(in->peer, Error(in->message.value(), "shutting down: training is over",
                                      StatusCode::kOutOfRange));
    if (!s.ok()) break;
  }
  LOG(INFO) << "ps " << options_.task_index << ": stopped at global step " << global_step_ << " ("
            << stats_.pushes << " pushes, " << stats_.pulls << " pulls, " << stats_.updates
            << " updates, " << stats_.dropped_stale << " stale dropped, " << stats_.rejected
            << " rejected, " << stats_.duplicates << " retried pushes answered once)";
  return Status::OK();
}

}  // namespace ps
}  // namespace pstrain
