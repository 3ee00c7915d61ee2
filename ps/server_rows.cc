// Row pulls and pushes: ParameterServer routes them to its table shard (ps/table_shard.h),
// which checks and applies them; here they get their replies, the global step their rows are
// read and updated at, a retry its answer, and a stale push in accumulate or sync mode is dropped
// as a dense one is. Rows are applied when they arrive, not summed over a window: a row is in few
// of a window's batches, and its optimizer state is the row's own.
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
  if (request.type == MessageType::kRowPush) return {{peer, HandleRowPush(request)}};
  // An evaluator reads rows as they are, as does an evaluation's read-only pull; a worker's
  // training pull creates the rows its batch touches.
  const bool training = request.role != "evaluator" && request.value == 0;
  Result<Tensor> rows = tables_->Pull(request.text, request.ids, global_step_, training);
  if (!rows.ok()) {
    ++stats_.rejected;
    return {{peer, Error(request, rows.status().message(), rows.status().code())}};
  }
  stats_.table_rows = tables_->rows();
  if (training)
    tables_->pulls().NotePull(Who(request), request.incarnation, request.text, request.ids);
  Message m = Reply(request, MessageType::kOk);
  m.tensors.push_back({request.text, std::move(rows).value()});
  ++stats_.pulls;
  return {{peer, m}};
}

Message ParameterServer::HandleRowPush(const Message& request) {
  // The dense push's header rules: a numbered sender process, a step within the schedule's
  // exact range, no sequence skipped.
  const std::string who = Who(request);
  constexpr int64_t kMaxStep = int64_t{1} << 53;
  if (request.tensors.size() != 1 || request.incarnation == 0 || request.sequence == 0 ||
      request.step < 0 || request.step > kMaxStep) {
    ++stats_.rejected;
    return Error(request,
                 "a row push needs one gradient tensor, its sender's incarnation and "
                 "sequence (both > 0) and a step from 0 to 2^53; got " +
                     std::to_string(request.incarnation) + ", " + std::to_string(request.sequence) +
                     " and step " + std::to_string(request.step));
  }
  if (tables_->Applied(who, request.incarnation, request.sequence)) {
    ++stats_.duplicates;
    return Reply(request, MessageType::kOk);  // a retry: applied once already
  }
  // Whose rows these are comes first (the more telling refusal), then whether a pull of them
  // came before (one row push per pull).
  Status paced = tables_->CheckOwned(request.text, request.ids);
  if (paced.ok()) {
    paced = tables_->pulls().MayPush(who, request.incarnation, request.text, request.ids);
  }
  if (!paced.ok()) {
    ++stats_.rejected;
    return Error(request,
                 who + "'s row push of step " + std::to_string(request.step) +
                     " refused: " + paced.message(),
                 paced.code());
  }
  // As the accumulate and sync policies drop a stale dense push (accumulate_updates.cc).
  if (options_.mode != UpdateMode::kAsync && request.step < global_step_ - options_.max_staleness) {
    ++stats_.dropped_stale;
    tables_->NoteApplied(who, request.incarnation, request.sequence);
    tables_->pulls().NotePush(who, request.incarnation, request.text, request.ids);
    Message m = Reply(request, MessageType::kOk);
    m.value = -1;  // dropped
    m.text = "stale: computed from step " + std::to_string(request.step) + ", now at " +
             std::to_string(global_step_) + " (max_staleness " +
             std::to_string(options_.max_staleness) + ")";
    return m;
  }
  Status applied =
      tables_->Push(who, request.text, request.ids, request.tensors[0].tensor, global_step_);
  if (!applied.ok()) {
    ++stats_.rejected;
    return Error(request,
                 who + "'s row push of step " + std::to_string(request.step) +
                     " refused: " + applied.message(),
                 applied.code());
  }
  tables_->NoteApplied(who, request.incarnation, request.sequence);
  tables_->pulls().NotePush(who, request.incarnation, request.text, request.ids);
  ++stats_.pushes;
  return Reply(request, MessageType::kOk);
}

}  // namespace ps
}  // namespace pstrain
