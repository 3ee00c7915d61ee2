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

// TensorFlow's op reads the int32 labels too. In inference (ONNX) the loss is its probabilities;
// the export writes its input as the graph's logits and this op as the probabilities.
Result<GraphOp> SoftmaxCrossEntropy::TensorFlowOp() const {
  return GraphOp("SparseSoftmaxCrossEntropyWithLogits")
      .Type("Tlabels", GraphDataType::kInt32)
      .ReadsLabels();
}
Result<GraphOp> SoftmaxCrossEntropy::OnnxOp() const { return GraphOp("Softmax").Int("axis", 1); }

PSTRAIN_REGISTER_LAYER("softmax_cross_entropy", SoftmaxCrossEntropy);

}  // namespace worker
}  // namespace pstrain
