// Row pulls and pushes: ParameterServer routes them to its table shard (ps/table_shard.h),
// which checks and applies them; here they get their replies, the global step their rows are
// read and updated at, a retry its answer, and a stale push in accumulate or sync mode is dropped
// as a dense one is. In async mode rows are applied when they arrive; in accumulate and sync
// modes they are summed over the window (ps/row_window.h) and their mean applied once the global
// step has left it, before the next row request is answered: the next step's pulls read it.
//
// Replicated (--replicas), a head sends its backups each push's rows as they are after it (a
// record of rows, docs/replication.md section 3) and answers the push once the chain holds it;
// a backup sets those rows. Rows a pull created and no push changed yet are the head's alone:
// a new head creates them again from the id and the seed, as every row is created. Rows untouched
// for a table's evict_after_steps go, on every replica, each time the global step passes a tenth
// of that (TableShard::Evict).
#include <algorithm>

#include "ps/server.h"

namespace pstrain {
namespace ps {

using wire::Message;
using wire::MessageType;

void ParameterServer::SetTables(std::unique_ptr<TableShard> tables) { tables_ = std::move(tables); }

std::vector<ParameterServer::Outgoing> ParameterServer::HandleRows(const std::string& peer,
                                                                   const Message& request) {
  if (tables_ == nullptr) {
    return {{peer, Error(request,
                         "this server holds no embedding tables (its config has no 'tables:' "
                         "section)",
                         StatusCode::kFailedPrecondition)}};
  }
  if (!initialized_) {
    return {{peer, Error(request, "variables are not initialised yet (waiting for the chief)",
                         StatusCode::kUninitialized)}};
  }
  std::vector<Outgoing> out;
  ApplyRowWindow(&out);
  if (request.type == MessageType::kRowPush) {
    for (Outgoing& o : HandleRowPush(peer, request)) out.push_back(std::move(o));
    return out;
  }
  // An evaluator reads rows as they are, as does an evaluation's read-only pull; a worker's
  // training pull creates the rows its batch touches.
  const bool training = request.role != "evaluator" && request.value == 0;
  Result<Tensor> rows = tables_->Pull(request.text, request.ids, global_step_, training);
  if (!rows.ok()) {
    ++stats_.rejected;
    out.push_back({peer, Error(request, rows.status().message(), rows.status().code())});
    return out;
  }
  stats_.table_rows = tables_->rows();
  if (training)
    tables_->pulls().NotePull(Who(request), request.incarnation, request.text, request.ids);
  Message m = Reply(request, MessageType::kOk);
  m.tensors.push_back({request.text, std::move(rows).value()});
  ++stats_.pulls;
  out.push_back({peer, std::move(m)});
  return out;
}

std::vector<ParameterServer::Outgoing> ParameterServer::HandleRowPush(const std::string& peer,
                                                                      const Message& request) {
  // The dense push's header rules: a numbered sender process, a step within the schedule's
  // exact range, no sequence skipped.
  const std::string who = Who(request);
  constexpr int64_t kMaxStep = int64_t{1} << 53;
  auto refuse = [&](const std::string& why, StatusCode code) -> std::vector<Outgoing> {
    ++stats_.rejected;
    return {{peer, Error(request, why, code)}};
  };
  if (request.tensors.size() != 1 || request.incarnation == 0 || request.sequence == 0 ||
      request.step < 0 || request.step > kMaxStep) {
    return refuse(
        "a row push needs one gradient tensor, its sender's incarnation and "
        "sequence (both > 0) and a step from 0 to 2^53; got " +
            std::to_string(request.incarnation) + ", " + std::to_string(request.sequence) +
            " and step " + std::to_string(request.step),
        StatusCode::kInvalidArgument);
  }
  if (tables_->Applied(who, request.incarnation, request.sequence)) {
    ++stats_.duplicates;
    return {{peer, Reply(request, MessageType::kOk)}};  // a retry: applied once already
  }
  // Whose rows these are comes first (the more telling refusal), then whether a pull of them
  // came before (one row push per pull).
  Status paced = tables_->CheckOwned(request.text, request.ids);
  if (paced.ok()) {
    paced = tables_->pulls().MayPush(who, request.incarnation, request.text, request.ids);
  }
  const std::string what = who + "'s row push of step " + std::to_string(request.step);
  if (!paced.ok()) return refuse(what + " refused: " + paced.message(), paced.code());
  // As the accumulate and sync policies drop a stale dense push (accumulate_updates.cc).
  if (options_.mode != UpdateMode::kAsync && request.step < global_step_ - options_.max_staleness) {
    ++stats_.dropped_stale;
    NoteRowPush(request);
    Message m = Reply(request, MessageType::kOk);
    m.value = -1;  // dropped
    m.text = "stale: computed from step " + std::to_string(request.step) + ", now at " +
             std::to_string(global_step_) + " (max_staleness " +
             std::to_string(options_.max_staleness) + ")";
    return {{peer, m}};
  }
  const Tensor& grads = request.tensors[0].tensor;
  const bool windowed = options_.mode != UpdateMode::kAsync;
  Status applied = windowed
                       ? tables_->AddToWindow(who, request.text, request.ids, grads, global_step_)
                       : tables_->Push(who, request.text, request.ids, grads, global_step_);
  if (!applied.ok()) return refuse(what + " refused: " + applied.message(), applied.code());
  NoteRowPush(request);
  ++stats_.pushes;
  // Taken into the window: its rows change, and reach the backups, when the window is applied.
  if (windowed) return {{peer, Reply(request, MessageType::kOk)}};
  EvictRows();
  std::vector<Outgoing> out;
  const Message reply = Reply(request, MessageType::kOk);
  if (!chain_.active()) {
    out.push_back({peer, reply});
    return out;
  }
  std::map<std::string, Tensor> rows;
  tables_->RowsOf(request.text, request.ids, &rows);
  const int64_t record = Replicate(request.step, NamedTensors(rows.begin(), rows.end()), {},
                                   {EntryOf(request, reply)}, &out);
  HoldUntil(record, peer, reply, &out);
  return out;
}

void ParameterServer::NoteRowPush(const Message& request) {
  tables_->NoteApplied(Who(request), request.incarnation, request.sequence);
  tables_->pulls().NotePush(Who(request), request.incarnation, request.text, request.ids);
}

void ParameterServer::ApplyRowWindow(std::vector<Outgoing>* out) {
  if (!tables_->WindowClosedBy(global_step_)) return;
  std::string failed;
  const std::map<std::string, std::vector<int64_t>> changed =
      tables_->ApplyWindow(required_pushes(), &failed);
  if (!failed.empty()) {
    LOG(ERROR) << "ps " << options_.task_index << ": shard " << options_.shard
               << ": a window's row update refused at step " << global_step_ << ": " << failed;
  }
  EvictRows();
  if (!chain_.active() || changed.empty()) return;
  std::map<std::string, Tensor> rows;
  for (const auto& [table, ids] : changed) tables_->RowsOf(table, ids, &rows);
  Replicate(global_step_, NamedTensors(rows.begin(), rows.end()), {}, {}, out);
}

void ParameterServer::EvictRows() {
  const int64_t interval = tables_->eviction_interval();
  if (interval == 0 || global_step_ < next_eviction_) return;
  const int64_t evicted = tables_->Evict(global_step_);
  next_eviction_ = global_step_ + interval;
  if (evicted > 0) {
    VLOG(1) << "ps " << options_.task_index << ": shard " << options_.shard << ": evicted "
            << evicted << " rows at step " << global_step_;
  }
  stats_.table_rows = tables_->rows();
}

Status ParameterServer::ApplyRowRecord(const Message& record) {
  if (tables_ == nullptr) {
    return FailedPrecondition("record " + std::to_string(record.sequence) +
                              " carries table rows and this server holds no tables");
  }
  std::map<std::string, Tensor> rows;
  for (const auto& t : record.tensors) {
    if (!TableShard::IsRowTensor(t.name) || !rows.emplace(t.name, t.tensor).second) {
      return InvalidArgument("record " + std::to_string(record.sequence) + " mixes table rows " +
                             "with '" + t.name + "' (or names it twice)");
    }
  }
  RETURN_IF_ERROR(
      tables_->Upsert(rows, global_step_).WithContext("record " + std::to_string(record.sequence)));
  for (const wire::PushEntry& e : record.pushes) {
    tables_->NoteApplied(e.role + " " + std::to_string(e.task_index), e.incarnation, e.sequence);
  }
  stats_.table_rows = tables_->rows();
  return Status::OK();
}

bool ParameterServer::IsRowRecord(const Message& record) {
  return !record.tensors.empty() && TableShard::IsRowTensor(record.tensors[0].name);
}

}  // namespace ps
}  // namespace pstrain
