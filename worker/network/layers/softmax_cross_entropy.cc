#include "worker/network/layers/softmax_cross_entropy.h"

namespace pstrain {
namespace worker {

Status SoftmaxCrossEntropy::Configure(const ConfigNode& node) {
  return node.CheckKeys({"name", "type", "inputs"});
}

Result<Shape> SoftmaxCrossEntropy::Setup(const std::vector<Shape>& inputs) {
  if (inputs[0].rank() != 1) {
    return ShapeError("expects logits [classes], got " + inputs[0].ToString());
  }
  classes_ = inputs[0].dim(0);
  return Shape{};
}

PSTRAIN_REGISTER_LAYER("softmax_cross_entropy", SoftmaxCrossEntropy);

}  // namespace worker
}  // namespace pstrain
