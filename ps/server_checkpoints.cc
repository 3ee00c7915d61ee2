// ParameterServer's side of cluster checkpoints (common/checkpoint/cluster_checkpoint.h): saving
// its shard in the background on the chief's request, restoring the step the chief picks, and
// the optimizer slots of a shard the chief initialises again. Kept apart from the request
// handling in ps/server.cc; the state is the server's own.
#include <algorithm>
#include <sstream>

#include "common/checkpoint/cluster_checkpoint.h"
#include "common/checkpoint/partial_restore.h"
#include "ps/server.h"

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
  // Gradients summed towards an update of the abandoned state are dropped with it.
  accumulators_.clear();
  for (const std::string& name : names) {
    accumulators_.emplace(name, GradientAccumulator(store_->Value(name).shape(), required_pushes(),
                                                    options_.max_staleness));
  }
  pushes_in_window_ = 0;
  global_step_ = data.global_step;
  initialized_ = true;
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

std::vector<ParameterServer::Outgoing> ParameterServer::HandleCheckpoint(const std::string& peer,
                                                                         const Message& request) {
  if (!initialized_) {
    return {{peer,
             Error(request, "nothing to save: not initialised", StatusCode::kFailedPrecondition)}};
  }
  if (request.step < 0) {
    return {{peer, Error(request,
                         "checkpoint step " + std::to_string(request.step) + "; steps are >= 0")}};
  }
  CheckpointData data;
  data.global_step = request.step;
  data.tensors = store_->StateTensors();  // shared: an update meanwhile leaves them be
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

void ParameterServer::SendFinishedCheckpoints(wire::ServerSocket* socket) {
  for (const Outgoing& o : TakeFinishedCheckpoints(false)) {
    Status s = socket->Reply(o.peer, o.message);
    if (!s.ok()) LOG(WARNING) << "ps " << options_.task_index << ": reply failed: " << s.ToString();
  }
}

}  // namespace ps
}  // namespace pstrain
