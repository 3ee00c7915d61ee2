// Which examples of which data epoch each worker holds and has used, kept by shard 0 so that
// workers may join and leave a running job and every example is still used exactly once per
// epoch (docs/replication.md section 6, "Data, exactly once per epoch"). The fixed modulo split
// (example i to worker i % count) cannot move a departed worker's remaining share; here an
// epoch's examples are cut into chunks (common/data/chunk_order.h) that workers lease, at most
// two at a time, and each push to shard 0 says how many examples of which chunk its batch used.
// A departed worker's chunks go back as free with `skip` = what its pushes used, and the next
// lessee skips that many of the chunk's fixed order.
//
// A state machine without sockets, as ParameterServer is: the same calls in the same order give
// the same state, so a backup that replays its head's Lease/Use/Release calls (or installs a
// Snapshot and replays the rest) stays equal to it.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/data/chunk_lease.h"
#include "common/status.h"
#include "common/wire/message.h"

namespace pstrain {
namespace ps {

struct DataLedgerOptions {
  int64_t examples = 0;  // per epoch; 0: no ledger (each worker reads its modulo share)
  int64_t chunk_size = 1024;
  int64_t epochs = 1;
  uint64_t seed = 0;
  std::string log_name = "ps 0";  // opens the ledger's log lines
};

// Whether `o` describes a ledger (examples > 0): the flag that set each field is named.
Status CheckDataLedgerOptions(const DataLedgerOptions& o);

// A lease's answer (common/data/chunk_lease.h).
using data::ChunkLease;

// A lease a worker holds (its name as the server writes it: "worker 1").
struct HeldLease {
  std::string worker;
  int64_t epoch = 0;
  int64_t chunk = 0;
};
bool operator==(const HeldLease& a, const HeldLease& b);

// The whole ledger, for a replica: `used` has one entry per chunk with examples used (count:
// how many), `leases` every lease held. Lease order within an epoch is a function of these.
struct DataLedgerSnapshot {
  std::vector<wire::ChunkUse> used;
  std::vector<HeldLease> leases;
  std::vector<std::string> revoked;  // released workers not yet told (Release)
};

class DataLedger {
 public:
  // `options` must pass CheckDataLedgerOptions (a programmer error otherwise).
  explicit DataLedger(DataLedgerOptions options);

  // A free chunk for `worker`, reading `epoch`: the first free one in ChunkOrder(seed, e) of
  // the first epoch e that has one. That is `epoch` or a later one, unless a departed worker
  // gave a chunk of an earlier epoch back: leftovers are finished first, by whoever asks next,
  // so the reply's epoch may be lower than `epoch`. OutOfRange once every chunk of every epoch
  // is used whole; Unavailable while the rest are leased to others (ask again: one may leave);
  // ResourceExhausted when `worker` already holds two; kAborted, once, after its leases were
  // released (the worker drops what it holds and asks again).
  Result<ChunkLease> Lease(const std::string& worker, int64_t epoch);
  // A replica's lease of the chunk its head leased (the head's reply says which): refused
  // unless that chunk is free.
  Status ApplyLease(const std::string& worker, int64_t epoch, int64_t chunk);
  // Records `worker`'s use of examples: all or nothing. A chunk not leased to `worker` is
  // refused with kAborted (its lease was revoked: the worker leases again); a count beyond
  // what the chunk has left, or outside the data, with kInvalidArgument naming it. A chunk
  // used whole ends its lease.
  Status Use(const std::string& worker, const std::vector<wire::ChunkUse>& uses);
  // A replica applies the uses a record carries as its head did: Use.
  Status ApplyRecordUses(const std::string& worker, const std::vector<wire::ChunkUse>& uses) {
    return Use(worker, uses);
  }
  // `worker` left or is missing: its leases go back as free, their used examples kept (the
  // next lessee skips them). Returns how many it held. A worker presumed dead may still be
  // running (a false death): until its next lease, which is answered kAborted once, nothing is
  // leased to it and its uses are refused, so that it cannot take a chunk back while a push
  // naming the chunk's old lease is still on its way.
  int Release(const std::string& worker);
  // A new process of `worker` (a new incarnation; the old one is fenced by the server): its
  // old leases go back as free, and it starts afresh.
  int Forget(const std::string& worker);

  DataLedgerSnapshot Snapshot() const;
  // Replaces the state with `snapshot` (from the network: checked whole before anything
  // changes, the first bad entry named).
  Status Install(const DataLedgerSnapshot& snapshot);

  // Examples of `epoch` used so far, and whether every one of them is.
  int64_t used(int64_t epoch) const;
  bool complete(int64_t epoch) const;
  int64_t chunks_per_epoch() const { return chunks_; }
  std::vector<HeldLease> leases_of(const std::string& worker) const;
  const DataLedgerOptions& options() const { return options_; }

 private:
  struct Epoch {
    std::vector<int64_t> order;     // ChunkOrder(seed, e)
    std::vector<int64_t> used;      // by chunk
    std::vector<std::string> held;  // by chunk: the lessee, empty when free or used whole
    int64_t used_examples = 0;
    int64_t whole_chunks = 0;
  };
  Epoch& EpochState(int64_t epoch);
  const Epoch* FindEpoch(int64_t epoch) const;
  int64_t ChunkSize(int64_t chunk) const;
  ChunkLease Grant(const std::string& worker, int64_t epoch, int64_t chunk);
  std::string Where(int64_t epoch, int64_t chunk) const;

  DataLedgerOptions options_;
  int64_t chunks_ = 0;
  std::map<int64_t, Epoch> epochs_;  // created when first leased from
  std::map<std::string, std::set<std::pair<int64_t, int64_t>>> leases_;  // worker -> (e, chunk)
  std::set<std::string> revoked_;  // released, not yet told by an aborted lease
};

}  // namespace ps
}  // namespace pstrain
