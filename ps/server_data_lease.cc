// The data ledger's requests (ps/data_ledger.h, docs/replication.md section 6): shard 0 leases
// chunks of the data to workers and records the examples their pushes used, so that workers may
// join and leave and every example is still used once per epoch. Apart from server.cc as the
// checkpoint requests are (ps/server_checkpoints.cc); server.cc calls in at four places: the
// dataLease case of Dispatch, a push's uses in HandlePush, a goodbye or a silence (CheckPeers),
// and a restarted worker (NotePeer).
//
// Reply to a dataLease (value: the epoch the worker reads): kOk with `uses` = {ChunkUse{epoch,
// chunk, count: the examples of it already used, to skip}}, `value` = the chunk's examples and
// `sequence` = its first example's index in the epoch's global order; `step` is the global step,
// as in every reply. kError with OutOfRange after the last epoch, Unavailable while every chunk
// left is leased to others (ask again), ResourceExhausted while the worker holds two, kAborted
// once after its leases were revoked (drop them and lease again).
//
// With chains, a lease and a push's uses change the ledger and so belong in the
// shard's records: a backup replays them with DataLedger::ApplyLease and ApplyRecordUses, and a
// joiner installs DataLedger::Snapshot from its replicaCopy. Until then the ledger lives on the
// head alone.
#include <glog/logging.h>

#include "ps/server.h"

namespace pstrain {
namespace ps {

using wire::Message;
using wire::MessageType;

void ParameterServer::StartDataLedger() {
  if (options_.data.examples == 0 || options_.shard != 0) return;
  DataLedgerOptions o = options_.data;
  o.log_name = "ps " + std::to_string(options_.task_index) + ": data";
  ledger_ = std::make_unique<DataLedger>(o);
  LOG(INFO) << o.log_name << ": leasing " << o.epochs << " epoch(s) of " << o.examples
            << " examples in " << ledger_->chunks_per_epoch() << " chunks of " << o.chunk_size;
}

std::vector<ParameterServer::Outgoing> ParameterServer::HandleDataLease(const std::string& peer,
                                                                        const Message& request) {
  Result<ChunkLease> lease = ledger_->Lease(Who(request), request.value);
  if (!lease.ok()) {
    const StatusCode code = lease.status().code();
    if (code == StatusCode::kUnavailable || code == StatusCode::kOutOfRange ||
        code == StatusCode::kResourceExhausted) {
      // Expected at an epoch's or the run's end, or while pushes catch up with a worker's
      // read-ahead, as every worker asks again: not a warning.
      Message m = Reply(request, MessageType::kError);
      m.text = "ps " + std::to_string(options_.task_index) + ": " + lease.status().message();
      m.error_code = code;
      VLOG(1) << m.text << " (" << Who(request) << ")";
      return {{peer, m}};
    }
    ++stats_.rejected;
    return {{peer, Error(request, lease.status().message(), code)}};
  }
  Message m = Reply(request, MessageType::kOk);
  m.uses = {{lease->epoch, lease->chunk, lease->skip}};
  m.value = lease->size;
  m.sequence = static_cast<uint64_t>(lease->first);
  return {{peer, m}};
}

Status ParameterServer::RecordDataUses(const Message& request) {
  if (ledger_ == nullptr || request.uses.empty()) return Status::OK();
  return ledger_->Use(Who(request), request.uses);
}

void ParameterServer::ReleaseDataLeases(const std::string& who, bool restarted) {
  if (ledger_ == nullptr) return;
  if (restarted) {
    ledger_->Forget(who);
  } else {
    ledger_->Release(who);
  }
}

}  // namespace ps
}  // namespace pstrain
