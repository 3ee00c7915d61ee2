#include "ps/magnitude_guard.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace pstrain {
namespace ps {

uint32_t MagnitudeGuard::Bound() const {
  if (binades_ <= 0 || window_.size() < kWarmup) return 0;
  std::vector<uint32_t> sorted(window_.begin(), window_.end());
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  return sorted[sorted.size() / 2] + static_cast<uint32_t>(binades_);
}

float MagnitudeGuard::Scale(uint32_t exponent) {
  const uint32_t bound = Bound();
  float scale = 1.0f;
  if (bound > 0 && exponent > bound) {
    scale = std::ldexp(1.0f, -static_cast<int>(exponent - bound));
    exponent = bound;
    ++scaled_;
  }
  if (binades_ > 0) {
    window_.push_back(exponent);
    if (window_.size() > kWindow) window_.pop_front();
  }
  return scale;
}

}  // namespace ps
}  // namespace pstrain
