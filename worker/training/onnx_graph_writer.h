// Appends ONNX nodes, initializers and value infos to one GraphProto: a layer's op chain
// (GraphOp, common/graph_op.h) becomes nodes "<layer>/<op>" with their attributes, each reading
// what its GraphOp names (the layer's inputs, its variables, an earlier op of the chain, or a
// small constant written as an initializer beside it). It knows ONNX's format and no layer type;
// onnx_export.cc walks the model and says which tensors a layer's inputs and variables are.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/graph_op.h"
#include "common/onnx/onnx.pb.h"
#include "common/status.h"
#include "common/tensor.h"

namespace pstrain {

// ONNX's element type of `type`.
int32_t OnnxElementType(GraphDataType type);

// `value`'s type: a tensor of `element_type` [N, per_example...], N symbolic.
void SetOnnxShape(onnx::ValueInfoProto* value, const std::vector<int64_t>& per_example,
                  int32_t element_type = onnx::TensorProto::FLOAT);

class OnnxGraphWriter {
 public:
  explicit OnnxGraphWriter(onnx::GraphProto* graph) : graph_(graph) {}

  onnx::NodeProto* Node(const std::string& op, const std::string& name,
                        const std::vector<std::string>& inputs, const std::string& output);
  // The nodes of `op` and its followers (op.then) for `layer`: by default the first reads
  // `defaults` and each follower the one before; an op listing GraphOp::reads reads those, from
  // `inputs` (the layer's input tensors) and `variables` (its variables' tensors). The last op
  // writes `output`. An op reading something the layer lacks is an error naming the layer.
  Status Chain(const GraphOp& op, const std::string& layer, const std::vector<std::string>& inputs,
               const std::vector<std::string>& variables, const std::vector<std::string>& defaults,
               const std::string& output);
  void Initializer(const std::string& name, const Tensor& value);
  void ValueInfo(const std::string& name, const std::vector<int64_t>& per_example);

 private:
  // What `in` (read by an op whose node is `node`, the chain's outputs so far in `outputs`) is.
  Result<std::string> Resolve(const GraphOpInput& in, const std::string& node, size_t position,
                              const std::vector<std::string>& inputs,
                              const std::vector<std::string>& variables,
                              const std::vector<std::string>& outputs);
  void Constant(const std::string& name, const GraphConstant& value);

  onnx::GraphProto* graph_;
};

}  // namespace pstrain
