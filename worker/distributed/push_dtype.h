// --push_dtype: the dtype a worker's gradients travel to the servers in, and its step's pulls
// back. bf16 halves the bytes (common/bfloat16.h: float32's range, so no loss scaling); the
// servers widen what arrives to float32 and keep float32 master weights and optimizer slots,
// so every update mode and optimizer works unchanged. fp16 is refused: its 5-bit exponent
// flushes small gradients to zero without the loss scaling pstrain does not do.
//
// Error feedback: what rounding took from a push is added to the next one, so over steps the
// servers receive the gradients' sum, not one that loses up to 2^-9 of every element a step.
#pragma once

#include <map>
#include <string>

#include "common/status.h"
#include "common/tensor.h"
#include "common/wire/message.h"

namespace pstrain {
namespace worker {

// "fp32" or "bf16"; anything else an InvalidArgument naming the value and what is allowed.
Result<wire::TensorDType> ParsePushDType(const std::string& value);

// The residual of each pushed tensor, by its key (a variable's partition): Round(key, g) sends
// bfloat16(g + r) and keeps r = (g + r) - bfloat16(g + r) for the next push of that key.
class ErrorFeedback {
 public:
  // g + r rounded to bfloat16 (as float32, so exactly what the frame will carry), a new tensor;
  // `gradient` is left as it is. A non-finite sum is sent as it is (the server refuses it by
  // name) and leaves no residual.
  Tensor Round(const std::string& key, const Tensor& gradient);

  // The residual kept for `key` (an empty Tensor before its first push).
  const Tensor& Residual(const std::string& key) const;

 private:
  std::map<std::string, Tensor> residuals_;
};

}  // namespace worker
}  // namespace pstrain
