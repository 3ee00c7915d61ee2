// ParameterServer's side of cluster checkpoints (common/checkpoint/cluster_checkpoint.h): saving
// its shard in the background on the chief's request, restoring the step the chief picks, and
// the optimizer slots of a shard the chief initialises again. Kept apart from the request
// handling in ps/server.cc; the state is the server's own.
#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "common/checkpoint/cluster_checkpoint.h"
#include "common/checkpoint/partial_restore.h"
#include "ps/server.h"
#include "ps/snapshot_parts.h"

namespace pstrain {
namespace ps {

using wire::Message;
using wire::MessageType;

void ParameterServer::FindCheckpoints() {
  const std::vector<int64_t> steps = checkpoints_->WholeSteps();
  std::string list;
  for (int64_t s : steps) list += (list.empty() ? "" : ", ") + std::to_string(s);
  LOG(INFO) << "ps " << options_.task_index << ": "
            << (steps.empty()
                    ? "no checkpoint of its shard in " + ShardDir()
                    : "whole checkpoints of its shard at steps " + list + " in " + ShardDir())
            << "; the chief picks the step every shard restores";
}

Status ParameterServer::RestoreStep(int64_t step) {
  const std::string me = "ps " + std::to_string(options_.task_index);
  ASSIGN_OR_RETURN(CheckpointData data, checkpoints_->Read(step));
  const std::string path = ShardDir() + "/" + CheckpointName(step);
  auto listed = data.metadata.find("variables");
  if (listed == data.metadata.end()) {
    return DataLoss(path + ": the checkpoint lists no variables (metadata 'variables')");
  }
  std::vector<std::string> names;
  std::stringstream in(listed->second);
  for (std::string name; std::getline(in, name, ',');) {
    if (!data.tensors.count(name)) return DataLoss(path + ": lacks variable '" + name + "'");
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  // The rows are checked before anything changes, and restored once the variables are.
  if (tables_ != nullptr) RETURN_IF_ERROR(tables_->CheckRestore(data.tensors));
  if (initialized_) {
    // The cluster goes back to `step` with this server running: the same variables, new values,
    // copied in place after whatever still shares them (a reply in flight, a save) has its own.
    if (names != store_->Names()) {
      return FailedPrecondition(path + " holds other variables than this running server");
    }
    for (const std::string& name : names) store_->DetachIfShared(name);
  } else {
    for (const std::string& name : names) {
      if (store_->Has(name)) return FailedPrecondition("variable '" + name + "' already held");
    }
    for (const std::string& name : names) {
      RETURN_IF_ERROR(store_->AddVariable(name, data.tensors.at(name).Clone()));
    }
  }
  std::map<std::string, Tensor> state = store_->StateTensors();
  ASSIGN_OR_RETURN(RestoreReport report, RestoreInto(data, RestoreFilter{}, &state));
  if (tables_ != nullptr) RETURN_IF_ERROR(tables_->RestoreFrom(data.tensors, data.global_step));
  // Gradients summed towards an update of the abandoned state are dropped with it.
  policy_->Reset(*store_);
  global_step_ = data.global_step;
  initialized_ = true;
  if (chain_.successor() >= 0) {
    LOG(WARNING) << me << ": restored with task " << chain_.successor() << " behind it in shard "
                 << options_.shard << "'s chain; its replicas hold other values until they rejoin";
  }
  chain_.Reset(0, global_step_);
  checkpoints_->ForgetAfter(step);
  LOG(INFO) << me << ": restored its shard of committed step " << step << " from " << path << " ("
            << report.restored.size() << " tensors, global step " << global_step_ << ")";
  return Status::OK();
}

Message ParameterServer::HandleRestore(const Message& request) {
  // Only the chief decides which step the cluster goes back to (ps/permissions.h trusts the
  // header's role once the sender's key agrees with it).
  if (request.role != "chief") {
    return Error(request, "only the chief may ask for a restore", StatusCode::kPermissionDenied);
  }
  Status s = RestoreStep(request.step);
  if (!s.ok()) return Error(request, s.message(), s.code());
  Message m = Reply(request, MessageType::kOk);
  m.value = 1;
  m.text = "restored";
  return m;
}

std::string ParameterServer::RestoreSlots(int64_t step) {
  std::map<std::string, Tensor> slots = store_->StateTensors();
  for (const std::string& name : store_->Names()) slots.erase(name);
  if (slots.empty()) return "the optimizer keeps no slots";
  Result<CheckpointData> data = checkpoints_->ReadNewestAtOrBefore(step);
  if (!data.ok()) return "optimizer slots start afresh: no checkpoint at or before this step";
  Result<RestoreReport> report = RestoreInto(*data, RestoreFilter{}, &slots);
  if (!report.ok()) {
    LOG(WARNING) << "ps " << options_.task_index
                 << ": optimizer slots start afresh: " << report.status().ToString();
    return "optimizer slots start afresh";
  }
  return "optimizer slots from its checkpoint of step " + std::to_string(data->global_step) +
         (report->missing.empty()
              ? ""
              : ", " + std::to_string(report->missing.size()) + " of them afresh (not in it)");
}

std::string ParameterServer::RestoreTables(int64_t step) {
  if (tables_ == nullptr) return "";
  Result<CheckpointData> data = checkpoints_->ReadNewestAtOrBefore(step);
  if (!data.ok()) return "; table rows start afresh: no checkpoint at or before this step";
  Status s = tables_->RestoreFrom(data->tensors, data->global_step);
  if (!s.ok()) {
    LOG(WARNING) << "ps " << options_.task_index << ": table rows start afresh: " << s.ToString();
    return "; table rows start afresh";
  }
  return "; " + std::to_string(tables_->rows()) + " table rows from its checkpoint of step " +
         std::to_string(data->global_step);
}

std::vector<ParameterServer::Outgoing> ParameterServer::HandleCheckpoint(const std::string& peer,
                                                                         const Message& request) {
  if (!initialized_) {
    return {{peer, Error(request, "nothing to save: not initialised", StatusCode::kUninitialized)}};
  }
  if (request.step < 0) {
    return {{peer, Error(request,
                         "checkpoint step " + std::to_string(request.step) + "; steps are >= 0")}};
  }
  CheckpointData data;
  data.global_step = request.step;
  data.tensors = store_->StateTensors();  // shared: an update meanwhile leaves them be
  if (tables_ != nullptr) tables_->SaveTo(&data.tensors);  // copies of the rows
  std::string names;
  for (const std::string& n : store_->Names()) names += (names.empty() ? "" : ",") + n;
  data.metadata["variables"] = names;
  data.metadata["ps_task"] = std::to_string(options_.task_index);
  saving_[checkpoints_->StartSave(std::move(data))] = {peer, request};
  return {};  // answered when the file is durable (TakeFinishedCheckpoints)
}

std::vector<ParameterServer::Outgoing> ParameterServer::TakeFinishedCheckpoints(bool wait) {
  std::vector<Outgoing> out;
  for (ShardCheckpoints::Finished& f : checkpoints_->TakeFinished(wait)) {
    auto it = saving_.find(f.ticket);
    if (it == saving_.end()) continue;
    const Waiting& w = it->second;
    if (f.path.ok()) {
      Message m = Reply(w.request, MessageType::kOk);
      m.text = f.path.value();
      out.push_back({w.peer, m});
    } else {
      out.push_back({w.peer, Error(w.request, f.path.status().ToString(), f.path.status().code())});
    }
    saving_.erase(it);
  }  // each snapshot is released here, on the serving thread
  return out;
}

// A joiner's copy of this shard (docs/replication.md section 5): the values and slots shared, as
// a checkpoint takes them (an update meanwhile writes elsewhere), the applied record and step,
// and the retry cache of every push those hold.
Message ParameterServer::Snapshot() {
  Message copy = FromThisServer(MessageType::kReplicaCopy);
  copy.shard = options_.shard;
  copy.map_epoch = chain_.epoch();
  copy.sequence = static_cast<uint64_t>(chain_.records());
  copy.request_id = copy.sequence;
  copy.value = global_step_;
  copy.text = Fingerprint();
  copy.link = chain_.link();
  for (const auto& [name, t] : store_->StateTensors()) copy.tensors.push_back({name, t});
  if (tables_ != nullptr) {
    std::map<std::string, Tensor> rows;
    tables_->SaveTo(&rows);
    for (auto& [name, t] : rows) copy.tensors.push_back({name, std::move(t)});
  }
  for (const auto& [who, p] : peers_) {
    // A push of the open accumulate window is in no record yet: its entry comes with its window's.
    if (p.last_push_sequence == 0 || p.last_push_record < 0) continue;
    const size_t space = who.rfind(' ');
    Message request;
    request.role = who.substr(0, space);
    request.task_index = std::atoi(who.c_str() + space + 1);
    request.incarnation = p.incarnation;
    request.sequence = p.last_push_sequence;
    copy.pushes.push_back(EntryOf(request, p.last_push_reply));
  }
  return copy;
}

Status ParameterServer::InstallSnapshot(const Message& copy) {
  ASSIGN_OR_RETURN(SnapshotParts parts,
                   SplitSnapshot(copy.tensors, store_->optimizer().slot_names(), tables_ != nullptr,
                                 initialized_ ? store_.get() : nullptr));
  RETURN_IF_ERROR(CheckSnapshotPlace(copy));
  RETURN_IF_ERROR(CheckPushEntries(copy.pushes, options_.cluster.workers).WithContext("the copy"));
  if (tables_ != nullptr)
    RETURN_IF_ERROR(tables_->CheckRestore(parts.rows).WithContext("the copy"));
  // Everything checked: in place after whatever shares the old bytes has its own, as a restore.
  for (const auto& [name, value] : parts.values) {
    if (initialized_) {
      store_->DetachIfShared(name);
    } else {
      RETURN_IF_ERROR(store_->AddVariable(name, value.Clone()));
    }
  }
  std::map<std::string, Tensor> state = store_->StateTensors();
  for (const auto& t : copy.tensors) {
    auto it = state.find(t.name);
    if (it != state.end()) it->second.CopyFrom(t.tensor);
  }
  policy_->Reset(*store_);
  global_step_ = copy.value;
  if (tables_ != nullptr) {
    RETURN_IF_ERROR(tables_->RestoreFrom(parts.rows, global_step_));  // checked above: cannot fail
    stats_.table_rows = tables_->rows();
  }
  initialized_ = true;
  for (const wire::PushEntry& e : copy.pushes) {
    InstallPush(e, static_cast<int64_t>(copy.sequence));
  }
  chain_.Reset(static_cast<int64_t>(copy.sequence), global_step_, copy.link);
  return Status::OK();
}

}  // namespace ps
}  // namespace pstrain
