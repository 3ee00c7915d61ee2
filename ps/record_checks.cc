// Checks of a replication record and of retry-cache entries (ps/record_checks.h).
#include "ps/record_checks.h"

#include <algorithm>
#include <set>

#include "common/wire/pair_tag.h"
#include "ps/table_shard.h"

namespace pstrain {
namespace ps {

using wire::Message;

Status CheckRecordFollows(const Message& record, const ReplicaPlace& here) {
  constexpr int64_t kMaxStep = int64_t{1} << 53;
  const int64_t sequence = static_cast<int64_t>(record.sequence);
  if (sequence != here.records + 1) {
    return InvalidArgument("record " + std::to_string(sequence) + " skips ahead: shard " +
                           std::to_string(here.shard) + " holds records up to " +
                           std::to_string(here.records) + " (expected record " +
                           std::to_string(here.records + 1) + ")");
  }
  if (!wire::SameTag(record.link, here.link)) {
    // Another sender's records, or a forger's who guessed the sequence: nothing of it is taken.
    return InvalidArgument("record " + std::to_string(sequence) + " does not follow the records " +
                           "this replica of shard " + std::to_string(here.shard) +
                           " holds (its chain link differs): refused, nothing applied");
  }
  if (record.value != here.global_step && record.value != here.global_step + 1) {
    return InvalidArgument("record " + std::to_string(sequence) + " takes the shard to step " +
                           std::to_string(record.value) + " from step " +
                           std::to_string(here.global_step) + " (expected the same or the next)");
  }
  if (record.step < 0 || record.step > kMaxStep) {
    return InvalidArgument("record " + std::to_string(sequence) + " applied at step " +
                           std::to_string(record.step) + "; steps are from 0 to 2^53");
  }
  // A record is a dense update or a row push's rows, never both.
  const size_t rows = std::count_if(record.tensors.begin(), record.tensors.end(),
                                    [](const auto& t) { return TableShard::IsRowTensor(t.name); });
  if (rows != 0 && (rows != record.tensors.size() || !record.assigns.empty())) {
    return InvalidArgument("record " + std::to_string(sequence) + " mixes table rows with " +
                           "dense gradients or assigns");
  }
  std::set<std::string> gradients;
  for (const auto& t : record.tensors) {
    // A row push's rows: checked whole by the table shard before any changes (TableShard::Upsert).
    if (TableShard::IsRowTensor(t.name)) continue;
    RETURN_IF_ERROR(here.store.CheckGradient(t.name, t.tensor));
    const bool assign =
        std::find(record.assigns.begin(), record.assigns.end(), t.name) != record.assigns.end();
    if (!assign && !gradients.insert(t.name).second) {
      return InvalidArgument("record " + std::to_string(sequence) + " carries two gradients of '" +
                             t.name + "'");
    }
  }
  RETURN_IF_ERROR(CheckPushEntries(record.pushes, here.workers)
                      .WithContext("record " + std::to_string(sequence)));
  return Status::OK();
}

Status CheckPushEntries(const std::vector<wire::PushEntry>& entries, int workers) {
  // One per sender of the cluster at most: a record answers each push once, a copy holds one
  // entry per sender; the entries become the peer table, which must stay the cluster's.
  if (workers > 0 && entries.size() > static_cast<size_t>(workers)) {
    return InvalidArgument(std::to_string(entries.size()) +
                           " retry-cache entries for a cluster of " + std::to_string(workers) +
                           " worker(s)");
  }
  for (const wire::PushEntry& e : entries) {
    if ((e.role != "worker" && e.role != "chief") || e.task_index < 0 ||
        (workers > 0 && e.task_index >= workers) || e.sequence == 0) {
      return InvalidArgument("a retry-cache entry of '" + e.role + "' task " +
                             std::to_string(e.task_index) + " push " + std::to_string(e.sequence) +
                             ": expected a worker (or the chief) of the cluster and a push > 0");
    }
  }
  return Status::OK();
}

}  // namespace ps
}  // namespace pstrain
