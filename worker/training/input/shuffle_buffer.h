// TF's RandomShuffleQueue as one epoch's reader sees it: examples enter until `capacity` are
// held, and a uniformly random one leaves while more than `min_after_dequeue` would remain
// (or once the epoch's input is exhausted, so the buffer drains and no example crosses into
// the next epoch).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "common/status.h"
#include "worker/training/input/example_source.h"

namespace pstrain {

class ShuffleBuffer {
 public:
  // capacity 0 passes examples through in order.
  ShuffleBuffer(int64_t capacity, int64_t min_after_dequeue, std::mt19937_64* rng);

  // Call after source->StartEpoch().
  void StartEpoch();
  // The next example of the epoch from `source`; OutOfRange once source and buffer are empty.
  Status Next(ExampleSource* source, RawExample* out);

 private:
  int64_t capacity_;
  int64_t min_after_dequeue_;
  std::mt19937_64* rng_;
  std::vector<RawExample> buffer_;
  bool exhausted_ = false;
};

}  // namespace pstrain
