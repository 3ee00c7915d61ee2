#include "worker/training/input/shuffle_buffer.h"

#include <glog/logging.h>

namespace pstrain {

ShuffleBuffer::ShuffleBuffer(int64_t capacity, int64_t min_after_dequeue, std::mt19937_64* rng)
    : capacity_(capacity), min_after_dequeue_(min_after_dequeue), rng_(rng) {
  CHECK(capacity == 0 || capacity > min_after_dequeue) << "capacity must exceed min_after_dequeue";
  buffer_.reserve(capacity);
}

void ShuffleBuffer::StartEpoch() {
  buffer_.clear();
  exhausted_ = false;
}

Status ShuffleBuffer::Next(ExampleSource* source, RawExample* out) {
  if (capacity_ == 0) return source->Next(out);
  // The reader keeps the queue full, as TF's queue runners do in steady state, so each
  // dequeue chooses among `capacity` examples (never fewer than min_after_dequeue + 1).
  while (!exhausted_ && static_cast<int64_t>(buffer_.size()) < capacity_) {
    RawExample e;
    Status s = source->Next(&e);
    if (s.code() == StatusCode::kOutOfRange) {
      exhausted_ = true;
      break;
    }
    RETURN_IF_ERROR(s);
    buffer_.push_back(std::move(e));
  }
  if (buffer_.empty()) return OutOfRange("end of epoch");
  DCHECK(exhausted_ || static_cast<int64_t>(buffer_.size()) > min_after_dequeue_);
  std::uniform_int_distribution<size_t> pick(0, buffer_.size() - 1);
  const size_t i = pick(*rng_);
  std::swap(buffer_[i], buffer_.back());
  *out = std::move(buffer_.back());
  buffer_.pop_back();
  return Status::OK();
}

}  // namespace pstrain
