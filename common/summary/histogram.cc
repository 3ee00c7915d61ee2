#include "common/summary/histogram.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

namespace pstrain {
namespace {

std::vector<double> MakeDefaultBucketLimits() {
  std::vector<double> positive;
  for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) positive.push_back(v);
  positive.push_back(DBL_MAX);
  std::vector<double> limits;
  limits.reserve(2 * positive.size() + 1);
  for (auto it = positive.rbegin(); it != positive.rend(); ++it) limits.push_back(-*it);
  limits.push_back(0.0);
  limits.insert(limits.end(), positive.begin(), positive.end());
  return limits;
}

uint32_t FloatBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

float BitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// A binary search over ~1,500 limits per value is too slow for multi-million-element
// variables, so floats are first bucketed by their top 16 bits (sign, exponent, 7 mantissa
// bits). Each such cell spans a ratio of at most 1 + 2^-7, far below the limits' 1.1, so the
// cell's starting bucket is at most a step or two from the value's.
class BucketLookup {
 public:
  BucketLookup() : limits_(DefaultBucketLimits()), start_(1 << 16) {
    for (uint32_t cell = 0; cell < start_.size(); ++cell) {
      const bool negative = (cell & 0x8000) != 0;
      // The lowest float in the cell: the most negative one has the largest low bits.
      float lowest = BitsToFloat((cell << 16) | (negative ? 0xffff : 0));
      if (!std::isfinite(lowest)) lowest = negative ? -FLT_MAX : FLT_MAX;
      start_[cell] = static_cast<uint16_t>(
          std::upper_bound(limits_.begin(), limits_.end(), static_cast<double>(lowest)) -
          limits_.begin());
    }
  }

  // Index of the first limit > value, as std::upper_bound gives it (TF's Histogram::Add).
  // `value` must be finite; the last limit, DBL_MAX, stops the scan.
  size_t Bucket(float value) const {
    size_t b = start_[FloatBits(value) >> 16];
    const double v = value;
    while (limits_[b] <= v) ++b;
    return b;
  }

  size_t size() const { return limits_.size(); }

 private:
  const std::vector<double>& limits_;
  std::vector<uint16_t> start_;
};

}  // namespace

const std::vector<double>& DefaultBucketLimits() {
  static const std::vector<double>* limits = new std::vector<double>(MakeDefaultBucketLimits());
  return *limits;
}

Histogram ComputeHistogram(const float* values, int64_t n) {
  static const BucketLookup* lookup = new BucketLookup();
  std::vector<int64_t> counts(lookup->size(), 0);
  Histogram h;
  double min = DBL_MAX;
  double max = -DBL_MAX;
  int64_t num = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float f = values[i];
    if (!std::isfinite(f)) {
      ++h.non_finite;
      continue;
    }
    const double v = f;
    ++counts[lookup->Bucket(f)];
    min = std::min(min, v);
    max = std::max(max, v);
    ++num;
    h.sum += v;
    h.sum_squares += v * v;
  }
  h.num = static_cast<double>(num);
  if (num > 0) {
    h.min = min;
    h.max = max;
  }

  const std::vector<double>& limits = DefaultBucketLimits();
  for (size_t i = 0; i < counts.size();) {
    double end = limits[i];
    int64_t count = counts[i];
    ++i;
    if (count == 0) {
      while (i < counts.size() && counts[i] == 0) end = limits[i++];
    }
    h.bucket_limit.push_back(end);
    h.bucket.push_back(static_cast<double>(count));
  }
  return h;
}

}  // namespace pstrain
