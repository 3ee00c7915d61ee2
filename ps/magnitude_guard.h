// Gradients far larger than the ones pushed so far are scaled down before they are applied. A
// worker whose GPU produced a wild (but finite) gradient, a bad batch, or a key in the wrong
// hands would otherwise move the model by as much as it likes, within what the optimizer's
// state holds. The measure is a push's largest element, in binades (its float exponent, which
// the server reads anyway to refuse NaN and Inf, so it costs no pass of its own): a push whose
// largest element lies more than `binades` above the median of the last pushes taken (from any
// worker) is scaled by a power of two (exactly) so that it lies at that bound, counted and
// logged. The median of a window is robust: a few outliers, or one worker's, do not move it.
// Until `warmup` pushes have been taken nothing is scaled (the first gradients are the
// largest of a run).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

namespace pstrain {
namespace ps {

class MagnitudeGuard {
 public:
  static constexpr size_t kWindow = 256;
  static constexpr size_t kWarmup = 32;

  // `binades` 0 turns the guard off.
  explicit MagnitudeGuard(int binades) : binades_(binades) {}

  // The power of two (<= 1) to scale a push by whose largest element has float exponent
  // `exponent` (biased, as in IEEE 754; 0 for an all-zero push): 1 unless it lies more than
  // the bound above the window's median. Then records the push's exponent after scaling.
  float Scale(uint32_t exponent);
  // The bound now (a biased exponent), or 0 while warming up or off.
  uint32_t Bound() const;
  int64_t scaled() const { return scaled_; }

 private:
  int binades_;
  std::deque<uint32_t> window_;
  int64_t scaled_ = 0;
};

}  // namespace ps
}  // namespace pstrain
