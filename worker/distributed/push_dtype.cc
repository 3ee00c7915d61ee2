#include "worker/distributed/push_dtype.h"

#include <cmath>

#include "common/bfloat16.h"

namespace pstrain {
namespace worker {

Result<wire::TensorDType> ParsePushDType(const std::string& value) {
  if (value == "fp32") return wire::TensorDType::kFloat32;
  if (value == "bf16") return wire::TensorDType::kBfloat16;
  if (value == "fp16") {
    return InvalidArgument(
        "--push_dtype=fp16 is not supported: float16's range would flush small gradients to "
        "zero without loss scaling, which pstrain does not do; use --push_dtype=bf16 (float32's "
        "range) or fp32");
  }
  return InvalidArgument("--push_dtype must be fp32 or bf16, got '" + value + "'");
}

Tensor ErrorFeedback::Round(const std::string& key, const Tensor& gradient) {
  Tensor& r = residuals_[key];
  if (r.empty() || r.shape() != gradient.shape()) r = Tensor(gradient.shape());
  Tensor sent = Tensor::Uninitialized(gradient.shape());
  for (int64_t i = 0; i < gradient.size(); ++i) {
    const float x = gradient[i] + r[i];
    sent[i] = RoundToBfloat16(x);
    r[i] = std::isfinite(sent[i]) ? x - sent[i] : 0.0f;
  }
  return sent;
}

const Tensor& ErrorFeedback::Residual(const std::string& key) const {
  static const Tensor kNone;
  auto it = residuals_.find(key);
  return it == residuals_.end() ? kNone : it->second;
}

}  // namespace worker
}  // namespace pstrain
