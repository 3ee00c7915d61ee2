#include "worker/training/input/leased_source.h"

#include <glog/logging.h>

#include <thread>

#include "common/data/chunk_order.h"

namespace pstrain {

LeasedExampleSource::LeasedExampleSource(LeaseChunk lease, ReadExample read, ImageShape shape,
                                         LeasedSourceOptions options)
    : lease_(std::move(lease)), read_(std::move(read)), shape_(shape), options_(options) {}

void LeasedExampleSource::ApplyDrop() {
  if (!drop_.exchange(false)) return;
  current_.reset();
  next_epoch_.reset();
  for (Run& r : runs_) r.dropped = true;
  LOG(WARNING) << "elastic data: the ledger revoked this worker's leases; dropping them";
}

Status LeasedExampleSource::StartEpoch(std::mt19937_64*) {
  ApplyDrop();
  read_in_epoch_ = 0;
  if (next_epoch_) {
    epoch_ = next_epoch_->lease.epoch;
    current_ = std::move(next_epoch_);
    next_epoch_.reset();
  }
  return Status::OK();
}

Status LeasedExampleSource::LeaseNext() {
  while (true) {
    ApplyDrop();
    if (stop_.load()) return Unavailable("the input is stopping");
    Result<data::ChunkLease> lease = lease_(epoch_);
    const StatusCode code = lease.status().code();
    if (code == StatusCode::kOutOfRange) {
      finished_ = true;
      return lease.status();
    }
    if (code == StatusCode::kAborted) {
      Drop();
      continue;
    }
    if (code == StatusCode::kUnavailable && read_in_epoch_ > 0) {
      // Every chunk left is leased, maybe the last to this worker, whose last uses wait in the
      // batch being made: the epoch ends here, so that the batch goes out and is pushed.
      return OutOfRange("end of epoch " + std::to_string(epoch_) + ": nothing free to lease");
    }
    if (code == StatusCode::kUnavailable || code == StatusCode::kResourceExhausted) {
      std::this_thread::sleep_for(options_.retry);
      continue;
    }
    if (!lease.ok()) return lease.status().WithContext("elastic data: leasing a chunk");
    if (lease->size <= 0 || lease->size > data::kMaxChunkExamples || lease->skip < 0 ||
        lease->skip >= lease->size || lease->first < 0) {
      return DataLoss("elastic data: a lease of epoch " + std::to_string(lease->epoch) + " chunk " +
                      std::to_string(lease->chunk) + " has " + std::to_string(lease->size) +
                      " examples from " + std::to_string(lease->first) + ", " +
                      std::to_string(lease->skip) + " used: expected size > skip >= 0");
    }
    Chunk c;
    c.lease = *lease;
    c.order = data::ExampleOrder(options_.seed, lease->epoch, lease->chunk, lease->size);
    c.next = lease->skip;
    if (lease->epoch != epoch_ && read_in_epoch_ > 0) {
      next_epoch_ = std::move(c);  // this worker's epoch ends here
      return OutOfRange("end of epoch " + std::to_string(epoch_));
    }
    epoch_ = lease->epoch;
    current_ = std::move(c);
    return Status::OK();
  }
}

Status LeasedExampleSource::Next(RawExample* out) {
  ApplyDrop();
  if (finished_) return OutOfRange("the data's epochs are used");
  while (!current_ || current_->next == current_->lease.size) {
    current_.reset();
    if (next_epoch_) return OutOfRange("end of epoch " + std::to_string(epoch_));
    RETURN_IF_ERROR(LeaseNext());
  }
  Chunk& c = *current_;
  const int64_t index = c.lease.first + c.order[c.next];
  RETURN_IF_ERROR(read_(index, out));
  ++c.next;
  ++read_in_epoch_;
  if (!runs_.empty() && !runs_.back().dropped && runs_.back().use.epoch == c.lease.epoch &&
      runs_.back().use.chunk == c.lease.chunk) {
    ++runs_.back().use.count;
  } else {
    runs_.push_back({{c.lease.epoch, c.lease.chunk, 1}, false});
  }
  return Status::OK();
}

std::vector<wire::ChunkUse> LeasedExampleSource::TakeUses(int64_t n) {
  std::vector<wire::ChunkUse> uses;
  while (n > 0 && !runs_.empty()) {
    Run& r = runs_.front();
    const int64_t take = std::min(n, r.use.count);
    if (!r.dropped) uses.push_back({r.use.epoch, r.use.chunk, take});
    r.use.count -= take;
    n -= take;
    if (r.use.count == 0) runs_.pop_front();
  }
  return uses;
}

ReadExample ReadImageSet(std::shared_ptr<const ImageSet> set) {
  return [set](int64_t index, RawExample* out) -> Status {
    if (index < 0 || index >= set->count) {
      return FailedPrecondition("example " + std::to_string(index) + " is outside the set's " +
                                std::to_string(set->count) +
                                ": do the servers' and this worker's data " + "agree?");
    }
    out->pixels.assign(reinterpret_cast<const char*>(set->image(index)), set->example_bytes());
    out->label = set->labels[index];
    return Status::OK();
  };
}

}  // namespace pstrain
