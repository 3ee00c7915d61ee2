// Gradients far larger than the ones pushed so far are scaled down before they are applied. A
// worker whose GPU produced a wild (but finite) gradient, a bad batch, or a key in the wrong
// hands would otherwise move the model by as much as it likes, within what the optimizer's
// state holds. The measure is a push's largest element, in binades (its float exponent, which
// the server reads anyway to refuse NaN and Inf, so it costs no pass of its own).
//
// Each sender is judged by its own last pushes and by everyone's: a push lies within the bound
// when it is at most `binades` above the lower of (its sender's median, the upper median of all
// senders' medians). Past the bound it is scaled by a power of two (exactly) to lie at it,
// counted and logged. So one sender's pushes cannot drag another's bound down (an honest
// sender's own median stays its bound), and, with three senders or more, cannot lift their own
// bound by pushing ever larger: the median over senders stays the honest ones'. A sender's
// windows record pushes after scaling; all-zero pushes (exponent 0) say nothing of magnitude and
// are not recorded. Until a sender has made `kWarmup` pushes only the others' medians bound it;
// until any sender has, nothing is scaled (the first gradients are the largest of a run).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/tensor.h"

namespace pstrain {
namespace ps {

class MagnitudeGuard {
 public:
  static constexpr size_t kWindow = 128;  // per sender
  static constexpr size_t kWarmup = 32;   // per sender

  // `binades` 0 turns the guard off.
  explicit MagnitudeGuard(int binades) : binades_(binades) {}

  // The power of two (<= 1) to scale `sender`'s push by whose largest element has float exponent
  // `exponent` (biased, as in IEEE 754; 0 for an all-zero push): 1 unless it lies past the
  // bound. Then records the push's exponent after scaling.
  float Scale(const std::string& sender, uint32_t exponent);
  // `sender`'s bound now (a biased exponent), or 0 while no sender is warmed up, or off.
  uint32_t Bound(const std::string& sender) const;
  int64_t scaled() const { return scaled_; }
  // Scale, applied: an outlier push's gradients are replaced by scaled copies (the received
  // frames stay as they came). Returns why, to log, or empty when the push was within the bound.
  std::string ScaleDown(const std::string& sender, uint32_t exponent,
                        std::vector<std::pair<std::string, Tensor>>* grads);

 private:
  struct Window {
    std::deque<uint32_t> exponents;
    uint32_t median = 0;  // of `exponents`, once warmed up
  };
  // The upper median of the warmed-up senders' medians; 0: none.
  uint32_t CrossMedian() const;

  int binades_;
  std::map<std::string, Window> senders_;
  int64_t scaled_ = 0;
};

}  // namespace ps
}  // namespace pstrain
