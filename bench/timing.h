// What every benchmark measures with: a steady clock, the seconds or nanoseconds since a start,
// and the median of trials (the figure each benchmark compares, robust to one noisy trial), of
// one measurement or of two taken in turn.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "common/status.h"

namespace pstrain {
namespace bench {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Nanoseconds per call of `call` (returning a Status), made `n` times; the first error stops it.
template <typename Call>
Result<double> NanosPerCall(int n, Call call) {
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < n; ++i) RETURN_IF_ERROR(call());
  return SecondsSince(start) * 1e9 / n;
}

// The medians of `trials` trials of two measurements taken in turn (so that both see the same
// machine), each trial printed as "trial t: <a_name> A GB/s, <b_name> B GB/s".
struct TrialMedians {
  double a;
  double b;
};
template <typename MeasureA, typename MeasureB>
TrialMedians AlternatingTrials(int trials, const char* a_name, MeasureA a, const char* b_name,
                               MeasureB b) {
  std::vector<double> a_trials, b_trials;
  for (int t = 0; t < trials; ++t) {
    a_trials.push_back(a());
    b_trials.push_back(b());
    std::printf("trial %d: %s %.2f GB/s, %s %.2f GB/s\n", t, a_name, a_trials.back(), b_name,
                b_trials.back());
  }
  return {Median(a_trials), Median(b_trials)};
}

}  // namespace bench
}  // namespace pstrain
