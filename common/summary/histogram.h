// Histograms of tensor values in TensorFlow's layout (tensorflow/core/lib/histogram), so that
// TensorBoard's histogram and distribution dashboards read them as they read TF's.
#pragma once

#include <cstdint>
#include <vector>

namespace pstrain {

// TensorFlow's default bucket limits: -DBL_MAX, ..., -1e-12, 0, 1e-12, ..., DBL_MAX, where the
// positive limits are 1e-12 * 1.1^k below 1e20 (computed by repeated multiplication, as TF
// does, so the doubles are bit-identical to TF's).
const std::vector<double>& DefaultBucketLimits();

struct Histogram {
  double min = 0;
  double max = 0;
  double num = 0;
  double sum = 0;
  double sum_squares = 0;
  // bucket[i] counts values v with bucket_limit[i-1] <= v < bucket_limit[i] (the first bucket
  // starts at -DBL_MAX). Runs of empty buckets are collapsed into one, as TF's
  // Histogram::EncodeToProto(..., preserve_zero_buckets=false) does.
  std::vector<double> bucket_limit;
  std::vector<double> bucket;
  // NaN and +-Inf values: TF's op rejects them; we leave them out of everything above instead
  // so that a diverging run still gets its other summaries.
  int64_t non_finite = 0;
};

// One pass over values[0, n). min and max are 0 when there are no finite values.
Histogram ComputeHistogram(const float* values, int64_t n);

}  // namespace pstrain
