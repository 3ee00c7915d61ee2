// Concat: the inputs joined along their first per-example axis (channels of [C, H, W], features of
// [F]); the other axes must agree. TensorFlow's ConcatV2 and ONNX's Concat on axis 1 (the batch
// is axis 0). A Wide & Deep model joins its dense features and its embeddings with it. The number
// of inputs is the length of the config's `inputs` list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "worker/network/layer.h"

namespace pstrain {
namespace worker {

class Concat : public Layer {
 public:
  Result<Shape> Setup(const std::vector<Shape>& inputs) override;
  int num_inputs() const override { return num_inputs_; }

  PSTRAIN_DECLARE_LAYER()

 private:
  int num_inputs_ = 2;
  std::vector<int64_t> widths_;  // per example, the elements of each input
  int64_t width_ = 0;            // per example, the output's elements
};

}  // namespace worker
}  // namespace pstrain
