#include "ps/magnitude_guard.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace pstrain {
namespace ps {

uint32_t MagnitudeGuard::CrossMedian() const {
  std::vector<uint32_t> medians;
  for (const auto& [sender, w] : senders_) {
    if (w.exponents.size() >= kWarmup) medians.push_back(w.median);
  }
  if (medians.empty()) return 0;
  std::nth_element(medians.begin(), medians.begin() + medians.size() / 2, medians.end());
  return medians[medians.size() / 2];
}

uint32_t MagnitudeGuard::Bound(const std::string& sender) const {
  if (binades_ <= 0) return 0;
  uint32_t base = CrossMedian();
  if (base == 0) return 0;
  auto it = senders_.find(sender);
  if (it != senders_.end() && it->second.exponents.size() >= kWarmup) {
    base = std::min(base, it->second.median);
  }
  return base + static_cast<uint32_t>(binades_);
}

float MagnitudeGuard::Scale(const std::string& sender, uint32_t exponent) {
  if (binades_ <= 0) return 1.0f;
  const uint32_t bound = Bound(sender);
  float scale = 1.0f;
  if (bound > 0 && exponent > bound) {
    scale = std::ldexp(1.0f, -static_cast<int>(exponent - bound));
    exponent = bound;
    ++scaled_;
  }
  if (exponent == 0) return scale;
  Window& w = senders_[sender];
  w.exponents.push_back(exponent);
  if (w.exponents.size() > kWindow) w.exponents.pop_front();
  if (w.exponents.size() >= kWarmup) {
    std::vector<uint32_t> sorted(w.exponents.begin(), w.exponents.end());
    std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
    w.median = sorted[sorted.size() / 2];
  }
  return scale;
}

std::string MagnitudeGuard::ScaleDown(const std::string& sender, uint32_t exponent,
                                      std::vector<std::pair<std::string, Tensor>>* grads) {
  const uint32_t bound = Bound(sender);
  const float scale = Scale(sender, exponent);
  if (scale == 1.0f) return "";
  for (auto& [name, grad] : *grads) {
    Tensor scaled = grad.Clone();
    for (int64_t i = 0; i < scaled.size(); ++i) scaled[i] *= scale;
    grad = std::move(scaled);
  }
  return "has an element near 2^" + std::to_string(static_cast<int>(exponent) - 127) + ", " +
         std::to_string(static_cast<int>(exponent - bound)) + " binades above the bound (" +
         std::to_string(binades_) +
         " above its sender's recent median or the senders' median): scaled down by 2^" +
         std::to_string(static_cast<int>(bound) - static_cast<int>(exponent)) +
         " (--gradient_outlier_binades)";
}

}  // namespace ps
}  // namespace pstrain
