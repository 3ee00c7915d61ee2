// Elastic data's example source (docs/replication.md section 6, "Data, exactly once per epoch"):
// instead of the fixed share i % count, a worker leases chunks of the data from shard 0's data
// ledger (ps/data_ledger.h) and reads each chunk's examples in the chunk's fixed order
// (common/data/chunk_order.h), from `skip` on where a departed worker's pushes stopped. The
// chunk's order replaces the shuffle buffer (the same idea, with a capacity of one chunk).
//
// The source records which chunk each example it returned came from; the pipeline takes the
// uses of each batch (TakeUses) for the step's push to shard 0 to carry, so the ledger counts an
// example as used exactly when its gradient is acknowledged.
//
// Leasing goes through a callback (PsClient's dataLease to shard 0 in a worker, a DataLedger in
// tests). A batch must not be larger than a chunk: the ledger lends a worker two chunks at a
// time, and a third waits for the pushes of the first.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "common/data/chunk_lease.h"
#include "common/data/idx.h"
#include "common/status.h"
#include "common/wire/message.h"
#include "worker/training/input/example_source.h"

namespace pstrain {

// A dataLease reply is a data::ChunkLease (common/data/chunk_lease.h).

// Asks the ledger for a chunk while reading `epoch`. Expected failures: OutOfRange (the data's
// epochs are used), Unavailable (every chunk left is leased to others), ResourceExhausted (two
// held: pushes must catch up), kAborted (the leases were revoked: drop them).
using LeaseChunk = std::function<Result<data::ChunkLease>(int64_t epoch)>;
// Reads example `index` of the epoch's global order (the sorted file list's record order).
using ReadExample = std::function<Status(int64_t index, RawExample* out)>;

struct LeasedSourceOptions {
  uint64_t seed = 0;  // the ledger's seed: chunk example orders are drawn from it
  // How long to wait before asking again when nothing can be leased yet.
  std::chrono::milliseconds retry{100};
};

class LeasedExampleSource : public ExampleSource {
 public:
  LeasedExampleSource(LeaseChunk lease, ReadExample read, ImageShape shape,
                      LeasedSourceOptions options);

  // Begins the next epoch: the one of the chunk leased when the last epoch ended (a lease may
  // go on to a later epoch, or back to an earlier one's chunk a departed worker left).
  Status StartEpoch(std::mt19937_64* rng) override;
  // The next example of the chunks held; OutOfRange at the end of this worker's epoch (the
  // next chunk is another epoch's, or none is free while this epoch has read some: its last
  // batch must go out and be pushed first) and, for good, after the data's last epoch
  // (finished()). Waits, asking again, while nothing is free at an epoch's start.
  Status Next(RawExample* out) override;
  ImageShape shape() const override { return shape_; }
  int64_t size() const override { return -1; }  // depends on who else reads

  // The uses of the next `n` examples Next returned, in order, one entry per chunk run (a
  // batch may span two chunks). Examples read before a Drop count nothing.
  std::vector<wire::ChunkUse> TakeUses(int64_t n);
  // The ledger refused a use (kAborted: the leases were revoked): forget every chunk held and
  // every use not yet taken; the next Next leases afresh. Callable from any thread.
  void Drop() { drop_.store(true); }
  // Stops a Next that is waiting to lease (the pipeline is shutting down).
  void Stop() { stop_.store(true); }

  bool finished() const { return finished_; }
  int64_t epoch() const { return epoch_; }

 private:
  struct Chunk {
    data::ChunkLease lease;
    std::vector<int64_t> order;
    int64_t next = 0;
  };
  struct Run {
    wire::ChunkUse use;
    bool dropped = false;
  };
  // Leases the next chunk into `current_`, or says why not (OutOfRange: the data is used).
  Status LeaseNext();
  void ApplyDrop();

  const LeaseChunk lease_;
  const ReadExample read_;
  const ImageShape shape_;
  const LeasedSourceOptions options_;
  int64_t epoch_ = 0;
  int64_t read_in_epoch_ = 0;
  bool finished_ = false;
  std::optional<Chunk> current_;
  std::optional<Chunk> next_epoch_;  // leased, of another epoch: read after StartEpoch
  std::deque<Run> runs_;             // examples returned, not yet taken as uses
  std::atomic<bool> drop_{false};
  std::atomic<bool> stop_{false};
};

// Random access to an in-memory image set's examples, for LeasedExampleSource.
ReadExample ReadImageSet(std::shared_ptr<const ImageSet> set);

}  // namespace pstrain
