#include "ps/data_ledger.h"

#include <glog/logging.h>

#include <tuple>

#include "common/data/chunk_order.h"

namespace pstrain {
namespace ps {

namespace {
constexpr size_t kMaxLeasesPerWorker = 2;  // the chunk being read and the read-ahead
// Bounds keeping the ledger's per-chunk tables small (an ImageNet epoch is ~1250 chunks).
constexpr int64_t kMaxChunksPerEpoch = int64_t{1} << 24;
constexpr int64_t kMaxEpochs = int64_t{1} << 16;
}  // namespace

bool operator==(const HeldLease& a, const HeldLease& b) {
  return std::tie(a.worker, a.epoch, a.chunk) == std::tie(b.worker, b.epoch, b.chunk);
}

Status CheckDataLedgerOptions(const DataLedgerOptions& o) {
  if (o.examples <= 0) {
    return InvalidArgument("the data ledger needs the examples per epoch (> 0), got " +
                           std::to_string(o.examples));
  }
  if (o.chunk_size <= 0 || o.chunk_size > data::kMaxChunkExamples) {
    return InvalidArgument("--data_chunk must be 1 to " + std::to_string(data::kMaxChunkExamples) +
                           " examples, got " + std::to_string(o.chunk_size));
  }
  if (o.epochs <= 0 || o.epochs > kMaxEpochs) {
    return InvalidArgument("--num_epochs must be 1 to " + std::to_string(kMaxEpochs) +
                           " with elastic data, got " + std::to_string(o.epochs));
  }
  if (data::ChunkCount(o.examples, o.chunk_size) > kMaxChunksPerEpoch) {
    return InvalidArgument(std::to_string(o.examples) + " examples in chunks of " +
                           std::to_string(o.chunk_size) + " make more than " +
                           std::to_string(kMaxChunksPerEpoch) +
                           " chunks per epoch: raise --data_chunk");
  }
  return Status::OK();
}

DataLedger::DataLedger(DataLedgerOptions options) : options_(std::move(options)) {
  const Status s = CheckDataLedgerOptions(options_);
  CHECK(s.ok()) << s.ToString();
  chunks_ = data::ChunkCount(options_.examples, options_.chunk_size);
}

int64_t DataLedger::ChunkSize(int64_t chunk) const {
  return data::ChunkSize(options_.examples, options_.chunk_size, chunk);
}

std::string DataLedger::Where(int64_t epoch, int64_t chunk) const {
  return "epoch " + std::to_string(epoch) + " chunk " + std::to_string(chunk);
}

DataLedger::Epoch& DataLedger::EpochState(int64_t epoch) {
  auto [it, is_new] = epochs_.try_emplace(epoch);
  if (is_new) {
    Epoch& e = it->second;
    e.order = data::ChunkOrder(options_.seed, epoch, chunks_);
    e.used.assign(chunks_, 0);
    e.held.assign(chunks_, "");
  }
  return it->second;
}

const DataLedger::Epoch* DataLedger::FindEpoch(int64_t epoch) const {
  auto it = epochs_.find(epoch);
  return it == epochs_.end() ? nullptr : &it->second;
}

ChunkLease DataLedger::Grant(const std::string& worker, int64_t epoch, int64_t chunk) {
  Epoch& e = EpochState(epoch);
  e.held[chunk] = worker;
  leases_[worker].insert({epoch, chunk});
  ChunkLease lease;
  lease.epoch = epoch;
  lease.chunk = chunk;
  lease.skip = e.used[chunk];
  lease.first = data::ChunkFirst(chunk, options_.chunk_size);
  lease.size = ChunkSize(chunk);
  VLOG(1) << options_.log_name << ": " << worker << " leases " << Where(epoch, chunk) << " (skip "
          << lease.skip << " of " << lease.size << ")";
  return lease;
}

Result<ChunkLease> DataLedger::Lease(const std::string& worker, int64_t epoch) {
  if (worker.empty()) return InvalidArgument("a data lease needs a worker's name");
  if (revoked_.erase(worker) > 0) {
    return Aborted(worker + "'s leases were revoked (it was presumed gone): drop every chunk " +
                   "held and lease again");
  }
  if (epoch < 0) {
    return InvalidArgument("a data lease names epoch " + std::to_string(epoch) +
                           "; epochs count from 0");
  }
  auto held = leases_.find(worker);
  if (held != leases_.end() && held->second.size() >= kMaxLeasesPerWorker) {
    std::string which;
    for (const auto& [e, c] : held->second) which += (which.empty() ? "" : ", ") + Where(e, c);
    return ResourceExhausted(worker + " holds " + std::to_string(held->second.size()) +
                             " leases (" + which + "), the most a worker may: push the uses " +
                             "of one before leasing another");
  }
  // From the first epoch not used whole, not from `epoch`: a chunk a departed worker gave back
  // in an earlier epoch is finished before anything later is begun, by whoever asks next.
  bool all_used = true;
  for (int64_t ep = 0; ep < options_.epochs; ++ep) {
    const Epoch* known = FindEpoch(ep);
    if (known != nullptr && known->whole_chunks == chunks_) continue;
    Epoch& e = EpochState(ep);
    for (int64_t chunk : e.order) {
      if (e.held[chunk].empty() && e.used[chunk] < ChunkSize(chunk)) {
        return Grant(worker, ep, chunk);
      }
    }
    all_used = false;  // every unfinished chunk of `ep` is leased to someone
  }
  if (all_used) {
    return OutOfRange("no data left: the " + std::to_string(options_.epochs) + " epoch(s) of " +
                      std::to_string(options_.examples) + " examples are used");
  }
  return Unavailable("no free chunk in any of the " + std::to_string(options_.epochs) +
                     " epochs: the rest are leased to other workers; ask again (one may leave)");
}

Status DataLedger::ApplyLease(const std::string& worker, int64_t epoch, int64_t chunk) {
  if (epoch < 0 || epoch >= options_.epochs || chunk < 0 || chunk >= chunks_) {
    return InvalidArgument("a lease of " + Where(epoch, chunk) + " is outside the data (" +
                           std::to_string(options_.epochs) + " epochs of " +
                           std::to_string(chunks_) + " chunks)");
  }
  auto held = leases_.find(worker);
  if (held != leases_.end() && held->second.size() >= kMaxLeasesPerWorker) {
    return ResourceExhausted(worker + " already holds " + std::to_string(held->second.size()) +
                             " leases; a replica cannot give it " + Where(epoch, chunk));
  }
  Epoch& e = EpochState(epoch);
  if (!e.held[chunk].empty() || e.used[chunk] == ChunkSize(chunk)) {
    return FailedPrecondition(Where(epoch, chunk) + " is not free (" +
                              (e.held[chunk].empty() ? "used whole" : "held by " + e.held[chunk]) +
                              "): this replica's ledger differs from its head's");
  }
  Grant(worker, epoch, chunk);
  return Status::OK();
}

Status DataLedger::Use(const std::string& worker, const std::vector<wire::ChunkUse>& uses) {
  if (worker.empty()) return InvalidArgument("a data use needs a worker's name");
  if (!uses.empty() && revoked_.count(worker)) {
    return Aborted(worker + "'s leases were revoked (it was presumed gone): its uses of " +
                   Where(uses[0].epoch, uses[0].chunk) + " are refused; lease again");
  }
  // Everything is checked before anything changes; one push may name a chunk twice.
  std::map<std::pair<int64_t, int64_t>, int64_t> total;
  for (const wire::ChunkUse& u : uses) {
    if (u.epoch < 0 || u.epoch >= options_.epochs || u.chunk < 0 || u.chunk >= chunks_) {
      return InvalidArgument("a use of " + Where(u.epoch, u.chunk) + " is outside the data (" +
                             std::to_string(options_.epochs) + " epochs of " +
                             std::to_string(chunks_) + " chunks)");
    }
    if (u.count <= 0) {
      return InvalidArgument("a use of " + Where(u.epoch, u.chunk) + " counts " +
                             std::to_string(u.count) + " examples; expected > 0");
    }
    const Epoch* e = FindEpoch(u.epoch);
    const std::string holder = e == nullptr ? "" : e->held[u.chunk];
    if (holder != worker) {
      const bool whole = e != nullptr && e->used[u.chunk] == ChunkSize(u.chunk);
      return Aborted(worker + " used " + Where(u.epoch, u.chunk) + ", which is not leased to it (" +
                     (!holder.empty() ? "leased to " + holder
                      : whole         ? "used whole"
                                      : "free") +
                     "): its lease was revoked; drop your leases and lease again");
    }
    int64_t& sum = total[{u.epoch, u.chunk}];
    if (u.count > ChunkSize(u.chunk) - e->used[u.chunk] - sum) {
      return InvalidArgument(worker + " uses " + std::to_string(sum + u.count) + " examples of " +
                             Where(u.epoch, u.chunk) + ", which has " +
                             std::to_string(ChunkSize(u.chunk) - e->used[u.chunk]) + " left of " +
                             std::to_string(ChunkSize(u.chunk)));
    }
    sum += u.count;
  }
  for (const auto& [where, count] : total) {
    const auto [epoch, chunk] = where;
    Epoch& e = EpochState(epoch);
    e.used[chunk] += count;
    e.used_examples += count;
    if (e.used[chunk] < ChunkSize(chunk)) continue;
    e.held[chunk].clear();
    leases_[worker].erase(where);
    if (leases_[worker].empty()) leases_.erase(worker);
    if (++e.whole_chunks == chunks_) {
      LOG(INFO) << options_.log_name << ": epoch " << epoch << ": " << e.used_examples
                << " examples in " << chunks_ << " chunks, every one used once";
    }
  }
  return Status::OK();
}

int DataLedger::Release(const std::string& worker) {
  const bool told_nothing_yet = revoked_.count(worker) > 0;
  const int n = Forget(worker);
  if (n > 0 || told_nothing_yet) revoked_.insert(worker);
  return n;
}

int DataLedger::Forget(const std::string& worker) {
  revoked_.erase(worker);
  auto it = leases_.find(worker);
  if (it == leases_.end()) return 0;
  const int n = static_cast<int>(it->second.size());
  for (const auto& [epoch, chunk] : it->second) {
    Epoch& e = EpochState(epoch);
    e.held[chunk].clear();
    LOG(INFO) << options_.log_name << ": " << worker << "'s lease of " << Where(epoch, chunk)
              << " is free again, " << e.used[chunk] << " of its " << ChunkSize(chunk)
              << " examples used";
  }
  leases_.erase(it);
  return n;
}

DataLedgerSnapshot DataLedger::Snapshot() const {
  DataLedgerSnapshot s;
  for (const auto& [epoch, e] : epochs_) {
    for (int64_t chunk = 0; chunk < chunks_; ++chunk) {
      if (e.used[chunk] > 0) s.used.push_back({epoch, chunk, e.used[chunk]});
    }
  }
  for (const auto& [worker, held] : leases_) {
    for (const auto& [epoch, chunk] : held) s.leases.push_back({worker, epoch, chunk});
  }
  s.revoked.assign(revoked_.begin(), revoked_.end());
  return s;
}

Status DataLedger::Install(const DataLedgerSnapshot& snapshot) {
  DataLedger fresh(options_);
  for (const wire::ChunkUse& u : snapshot.used) {
    if (u.epoch < 0 || u.epoch >= options_.epochs || u.chunk < 0 || u.chunk >= chunks_) {
      return InvalidArgument("the ledger snapshot's use of " + Where(u.epoch, u.chunk) +
                             " is outside the data");
    }
    Epoch& e = fresh.EpochState(u.epoch);
    if (u.count <= 0 || u.count > ChunkSize(u.chunk) || e.used[u.chunk] != 0) {
      return InvalidArgument("the ledger snapshot's use of " + Where(u.epoch, u.chunk) +
                             " counts " + std::to_string(u.count) + " examples; expected 1 to " +
                             std::to_string(ChunkSize(u.chunk)) + ", once per chunk");
    }
    e.used[u.chunk] = u.count;
    e.used_examples += u.count;
    if (u.count == ChunkSize(u.chunk)) ++e.whole_chunks;
  }
  for (const HeldLease& l : snapshot.leases) {
    if (l.worker.empty())
      return InvalidArgument("the ledger snapshot has a lease without a holder");
    if (Status s = fresh.ApplyLease(l.worker, l.epoch, l.chunk); !s.ok()) {
      return s.WithContext("the ledger snapshot");
    }
  }
  for (const std::string& w : snapshot.revoked) {
    if (w.empty() || !fresh.leases_of(w).empty()) {
      return InvalidArgument("the ledger snapshot revokes '" + w + "', which holds leases");
    }
    fresh.revoked_.insert(w);
  }
  fresh.options_.log_name = options_.log_name;
  *this = std::move(fresh);
  return Status::OK();
}

int64_t DataLedger::used(int64_t epoch) const {
  const Epoch* e = FindEpoch(epoch);
  return e == nullptr ? 0 : e->used_examples;
}

bool DataLedger::complete(int64_t epoch) const {
  const Epoch* e = FindEpoch(epoch);
  return e != nullptr && e->whole_chunks == chunks_;
}

std::vector<HeldLease> DataLedger::leases_of(const std::string& worker) const {
  std::vector<HeldLease> out;
  auto it = leases_.find(worker);
  if (it == leases_.end()) return out;
  for (const auto& [epoch, chunk] : it->second) out.push_back({worker, epoch, chunk});
  return out;
}

}  // namespace ps
}  // namespace pstrain
