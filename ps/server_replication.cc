// ParameterServer's side of chain replication (docs/replication.md sections 3-5): the head
// turns each update into a record and holds the replies it justifies until the chain has it; a
// backup checks a record (its epoch, its sender, its sequence, its tensors) before applying it
// with the optimizer the head ran; a tail copies the shard to a joiner. The chain's state is
// ps/replica_chain.h; the sockets are ps/server_task.h's.
#include <algorithm>

#include "common/wire/refusal_log.h"
#include "ps/server.h"

namespace pstrain {
namespace ps {

using wire::Message;
using wire::MessageType;

namespace {

int64_t TensorBytes(const Message& m) {
  int64_t n = 0;
  for (const auto& t : m.tensors) n += static_cast<int64_t>(t.tensor.bytes());
  return n;
}

}  // namespace

wire::PushEntry ParameterServer::EntryOf(const Message& request, const Message& reply) {
  wire::PushEntry e;
  e.role = request.role;
  e.task_index = request.task_index;
  e.incarnation = request.incarnation;
  e.sequence = request.sequence;
  e.reply_step = reply.step;
  e.reply_value = reply.value;
  e.reply_text = reply.text;
  return e;
}

std::string ParameterServer::Fingerprint() const {
  return "protocol " + std::to_string(wire::kProtocolVersion) + "; " + store_->fingerprint();
}

std::vector<ParameterServer::Outgoing> ParameterServer::SetChain(const ChainView& chain) {
  ReplicaChain::View view{chain.epoch, chain.tasks, chain.joining, chain.self};
  ReplicaChain::Change change;
  if (!chain_.Set(view, &change)) return {};
  signature_.SawMap(chain.epoch, chain_.head_task());
  const std::string me = "ps " + std::to_string(options_.task_index) + ": shard " +
                         std::to_string(options_.shard) + " at map epoch " +
                         std::to_string(chain.epoch);
  std::vector<Outgoing> out;
  if (change.lost_head) {
    // Workers send these again to the new head, whose retry cache holds the committed ones.
    std::vector<HeldReply> held = chain_.TakeAllHeld();
    // The open window's pushes are answered aborted: their senders push them to the new head.
    for (HeldReply& h : policy_->TakeHeld()) held.push_back(std::move(h));
    for (Waiting& w : held_pushes_) held.push_back({w.peer, w.request});  // below --min_workers
    for (Barriers::Wait& w : barriers_.TakeAll()) held.push_back({w.peer, w.request});
    held_pushes_.clear();
    for (auto& [who, p] : peers_) {
      if (p.last_push_record < 0) p.last_push_record = 0;
    }
    for (HeldReply& h : held) {
      if (h.ack) continue;  // a predecessor's record: it resends to its new successor
      out.push_back({h.peer, Error(h.message,
                                   "not the head of shard " + std::to_string(options_.shard) +
                                       " at map epoch " + std::to_string(chain.epoch) +
                                       " (head: task " + std::to_string(chain_.head_task()) + ")",
                                   StatusCode::kAborted)});
    }
    LOG(WARNING) << me << ": no longer its head; " << out.size() << " held replies aborted";
  }
  if (change.became_head) {
    // Pulls the workers' last steps came from went to the head before this one.
    for (auto& [who, p] : peers_) p.pulled_at_previous_head = true;
    LOG(INFO) << me << ": head, at record " << chain_.records() << " and step " << global_step_
              << (initialized_ ? "" : " (no variables yet)");
  }
  if (change.new_successor) {
    const int to = chain_.successor();
    for (Message record : chain_.unacknowledged()) {
      record.map_epoch = chain_.epoch();
      SendRecord(std::move(record), to, &out);
    }
    LOG(INFO) << me << ": successor task " << to << ", sent " << chain_.unacknowledged().size()
              << " unacknowledged records again";
  }
  if (change.new_predecessor && chain_.joiner()) {
    LOG(INFO) << me << ": joining behind task " << chain_.predecessor() << "; waiting for its copy";
  }
  if (initialized_) CopyToJoiners(&out);
  // Records that waited for this map.
  for (ChainIntake::Waiting& w : intake_.TakeWaiting()) {
    std::vector<Outgoing> more = w.request.type == MessageType::kReplicate
                                     ? HandleReplicate(w.peer, w.request)
                                     : HandleReplicaCopy(w.peer, w.request);
    out.insert(out.end(), more.begin(), more.end());
  }
  Release(&out);
  return out;
}

std::vector<ParameterServer::Outgoing> ParameterServer::HandleServerReply(int from_task,
                                                                          const Message& reply) {
  std::vector<Outgoing> out;
  // "has no copy yet": this class's refusal of a record; "holds no replica": a ServerTask
  // that holds no server of the shard (it has not had the map, or it restarted).
  const bool lacks_copy = reply.type == MessageType::kError &&
                          (reply.text.find("has no copy yet") != std::string::npos ||
                           reply.text.find("holds no replica of shard") != std::string::npos);
  if (lacks_copy && chain_.JoinerLacksCopy(from_task, std::chrono::steady_clock::now())) {
    LOG(WARNING) << "ps " << options_.task_index << ": shard " << options_.shard << ": joiner task "
                 << from_task << " lacks its copy (a new process, or the copy was lost): copying "
                 << "again";
    CopyToJoiners(&out);
  }
  if (reply.type == MessageType::kOk) {
    chain_.Acknowledged(from_task, static_cast<int64_t>(reply.sequence));
    Release(&out);
    return out;
  }
  const std::string why = reply.text.empty() ? "an error without a message" : reply.text;
  PSTRAIN_REFUSAL_WARNING("ps-chain:" + std::to_string(from_task),
                          "ps " + std::to_string(options_.task_index) + ": shard " +
                              std::to_string(options_.shard) + ": task " +
                              std::to_string(from_task) + " refused: " + why);
  if (reply.error_code == StatusCode::kFailedPrecondition &&
      reply.text.find("train config") != std::string::npos) {
    chain_.CopyRefused(from_task);  // another binary or config: nothing more goes to it
  }
  return out;
}

std::vector<int> ParameterServer::CaughtUpJoiners() const { return chain_.CaughtUpJoiners(); }

int64_t ParameterServer::Replicate(int64_t step, NamedTensors prepared, NamedTensors assigns,
                                   std::vector<wire::PushEntry> pushes, std::vector<Outgoing>* out,
                                   std::optional<std::chrono::steady_clock::time_point> stamp_at) {
  Message record = FromThisServer(MessageType::kReplicate);
  record.shard = options_.shard;
  record.map_epoch = chain_.epoch();
  record.sequence = static_cast<uint64_t>(chain_.records() + 1);
  record.request_id = record.sequence;
  record.step = step;
  record.value = global_step_;  // the shard's step after the record
  record.link = chain_.link();
  for (auto& [name, t] : prepared) record.tensors.push_back({name, std::move(t)});
  for (auto& [name, t] : assigns) {
    record.tensors.push_back({name, std::move(t)});
    record.assigns.push_back(name);
  }
  record.pushes = std::move(pushes);
  const auto now = stamp_at.value_or(std::chrono::steady_clock::now());
  if (stamp_at || StampDue(now)) {  // before the tags, which cover the stamp
    record.state_digest = StateDigest();
    stamps_.Stamped(now);
  }
  if (Status s = signature_.Sign(chain_.epoch(), &record); !s.ok()) {
    LOG(ERROR) << "ps " << options_.task_index << ": record " << record.sequence
               << " goes untagged: " << s.ToString();
  }
  if (!stamp_at && chain_.TakeFirstAsHead()) {  // a record of no update is no failover's end
    LOG(INFO) << "ps " << options_.task_index << ": applied update " << record.sequence
              << " as head of shard " << options_.shard << " (step " << global_step_
              << ", map epoch " << chain_.epoch() << ")";
  }
  for (int to : chain_.Append(record)) SendRecord(record, to, out);
  return static_cast<int64_t>(record.sequence);
}

void ParameterServer::HoldUntil(int64_t sequence, const std::string& peer, const Message& reply,
                                std::vector<Outgoing>* out) {
  chain_.Hold(sequence, {peer, reply, false});
  Release(out);
}

void ParameterServer::Release(std::vector<Outgoing>* out) {
  for (HeldReply& h : chain_.Advance(global_step_)) {
    h.message.step = chain_.committed_step();
    h.message.map_epoch = chain_.epoch();
    // An unverified joiner acknowledges nothing past its copy: the tail finds it caught up only
    // once a stamp has verified it (ps/state_stamps.h).
    if (h.ack) {
      h.message.sequence =
          static_cast<uint64_t>(stamps_.Acknowledgeable(chain_.committed(), chain_.joiner()));
    }
    out->push_back({h.peer, std::move(h.message)});
  }
}

bool ParameterServer::NotTheHead(const std::string& peer, const Message& request,
                                 std::vector<Outgoing>* out) {
  if (!chain_.active() || chain_.head()) return false;
  switch (request.type) {
    case MessageType::kRegister:
    case MessageType::kPull:
    case MessageType::kPush:
    case MessageType::kBarrier:
    case MessageType::kCheckpoint:
    case MessageType::kRestore:
    case MessageType::kRowPull:
    case MessageType::kRowPush:
      break;
    default:
      return false;  // heartbeats and shutdown are the task's
  }
  out->push_back({peer, Error(request,
                              "not the head of shard " + std::to_string(options_.shard) +
                                  " at map epoch " + std::to_string(chain_.epoch()) +
                                  " (head: task " + std::to_string(chain_.head_task()) + ")",
                              StatusCode::kAborted)});
  return true;
}

bool ParameterServer::CheckChainSender(const std::string& peer, const Message& request,
                                       std::vector<Outgoing>* out) {
  Status why;
  switch (intake_.Check(chain_, peer, request, &why)) {
    case ChainIntake::Verdict::kTake:
      return true;
    case ChainIntake::Verdict::kWait:
      return false;
    case ChainIntake::Verdict::kRefuse:
      break;
  }
  ++stats_.rejected;
  out->push_back({peer, Error(request, why.message(), why.code())});
  return false;
}

void ParameterServer::SendRecord(Message record, int to, std::vector<Outgoing>* out) {
  stats_.bytes_replicated += TensorBytes(record);
  ++stats_.records_replicated;
  out->push_back({"", std::move(record), to});
}

Status ParameterServer::CheckRecord(const Message& record) const {
  if (!initialized_) {
    return FailedPrecondition("shard " + std::to_string(options_.shard) +
                              " has no copy yet to apply record " +
                              std::to_string(record.sequence) + " to");
  }
  RETURN_IF_ERROR(CheckRecordFollows(record, {options_.shard, chain_.records(), chain_.link(),
                                              global_step_, *store_, options_.cluster.workers}));
  return signature_.Check(record);
}

void ParameterServer::InstallPush(const wire::PushEntry& e, int64_t record) {
  const std::string who = e.role + " " + std::to_string(e.task_index);
  auto [it, is_new] = peers_.try_emplace(who);
  PeerState& p = it->second;
  if (is_new) p.last_seen = std::chrono::steady_clock::now();
  if (e.incarnation < p.incarnation) return;  // this replica has heard from a newer process
  p.incarnation = e.incarnation;
  p.last_push_sequence = e.sequence;
  p.last_push_record = record;
  p.pulled = true;  // its next push follows a pull this replica did not see (the head's)
  Message m = FromThisServer(MessageType::kOk);
  m.step = e.reply_step;
  m.value = e.reply_value;
  m.text = e.reply_text;
  p.last_push_reply = std::move(m);
}

std::vector<ParameterServer::Outgoing> ParameterServer::HandleReplicate(const std::string& peer,
                                                                        const Message& record) {
  std::vector<Outgoing> out;
  if (!CheckChainSender(peer, record, &out)) return out;
  const int64_t sequence = static_cast<int64_t>(record.sequence);
  Message ack = Reply(record, MessageType::kOk);
  if (sequence <= chain_.records()) {
    // Sent again to a new successor: held already (the prefix property); acknowledged as the
    // rest of the chain holds it.
    if (Status s = chain_.HoldResent(sequence, record.link, {peer, ack, true}); !s.ok()) {
      ++stats_.rejected;
      out.push_back({peer, Error(record, s.message(), s.code())});
      return out;
    }
    Release(&out);
    return out;
  }
  if (Status s = CheckRecord(record); !s.ok()) {
    ++stats_.rejected;
    out.push_back({peer, Error(record, s.message(), s.code())});
    return out;
  }
  if (IsRowRecord(record)) {
    // A head's row push: its rows as they are after it.
    if (Status s = ApplyRowRecord(record); !s.ok()) {
      ++stats_.rejected;
      out.push_back({peer, Error(record, s.message(), s.code())});
      return out;
    }
    global_step_ = record.value;
    EvictRows();
  } else {
    ApplyDenseRecord(record);
  }
  signature_.Took(record);
  if (!record.state_digest.empty() && !CheckStamp(peer, record, &out)) return out;
  Message forward = record;
  forward.task_index = options_.task_index;
  forward.incarnation = wire::ProcessIncarnation();
  forward.map_epoch = chain_.epoch();
  for (int to : chain_.Append(forward)) SendRecord(forward, to, &out);
  chain_.Hold(sequence, {peer, ack, true});
  Release(&out);
  return out;
}

void ParameterServer::ApplyDenseRecord(const Message& record) {
  const int64_t sequence = static_cast<int64_t>(record.sequence);
  // Assigns first, as the head made them when it took the pushes, then the update.
  NamedTensors grads;
  for (const auto& t : record.tensors) {
    const bool assign =
        std::find(record.assigns.begin(), record.assigns.end(), t.name) != record.assigns.end();
    if (assign) {
      store_->Assign(t.name, t.tensor);
    } else {
      grads.emplace_back(t.name, t.tensor);
    }
  }
  const auto start = std::chrono::steady_clock::now();
  Status s = store_->ApplyPrepared(record.step, grads, VariableStore::Holders::kKeepTheirBytes);
  stats_.apply_nanos +=
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  if (!s.ok())
    LOG(ERROR) << "ps " << options_.task_index << ": record " << sequence << ": " << s.ToString();
  if (record.value > global_step_) ++stats_.updates;
  global_step_ = record.value;
  for (const wire::PushEntry& e : record.pushes) InstallPush(e, sequence);
}

std::vector<ParameterServer::Outgoing> ParameterServer::HandleReplicaCopy(const std::string& peer,
                                                                          const Message& copy) {
  std::vector<Outgoing> out;
  if (!CheckChainSender(peer, copy, &out)) return out;
  auto refuse = [&](const Status& why) {
    ++stats_.rejected;
    out.push_back({peer, Error(copy, why.message(), why.code())});
    return out;
  };
  if (!chain_.joiner()) {
    return refuse(FailedPrecondition("a replica copy of shard " + std::to_string(options_.shard) +
                                     " to task " + std::to_string(options_.task_index) +
                                     ", which is not joining it at map epoch " +
                                     std::to_string(chain_.epoch())));
  }
  if (copy.text != Fingerprint()) {
    return refuse(FailedPrecondition(
        "a replica copy from a server with another train config or protocol: it has '" + copy.text +
        "', this server '" + Fingerprint() +
        "'; replicas must run the same binary and train config"));
  }
  if (Status s = InstallSnapshot(copy); !s.ok()) return refuse(s);
  signature_.Reset();
  stamps_.CopyInstalled(copy.task_index, static_cast<int64_t>(copy.sequence));
  LOG(INFO) << "ps " << options_.task_index << ": shard " << options_.shard
            << ": installed the copy"
            << " of task " << copy.task_index << " at record " << copy.sequence << ", step "
            << global_step_ << " (" << copy.tensors.size() << " tensors, " << copy.pushes.size()
            << " retry-cache entries; unverified until the head's next stamp)";
  Message ack = Reply(copy, MessageType::kOk);
  ack.sequence = copy.sequence;
  out.push_back({peer, ack});
  return out;
}

void ParameterServer::CopyToJoiners(std::vector<Outgoing>* out) {
  if (!initialized_ || !chain_.tail()) return;
  for (int joiner : chain_.JoinersToCopy()) {
    Message copy = Snapshot();
    stats_.bytes_replicated += TensorBytes(copy);
    ++stats_.copies_sent;
    chain_.CopySent(joiner, std::chrono::steady_clock::now());
    LOG(INFO) << "ps " << options_.task_index << ": shard " << options_.shard << ": copying to"
              << " joiner task " << joiner << " at record " << copy.sequence << ", step "
              << global_step_;
    out->push_back({"", std::move(copy), joiner});
  }
}

}  // namespace ps
}  // namespace pstrain
