// ONNX export of a trained model, so that it can be served away from pstrain (onnxruntime,
// TensorRT, OpenVINO, ...): the model config's layers, in their order and wiring, as ONNX
// operators (opset 13), with the trained variables as initializers under their own names
// ("conv1/weights"). The graph takes "input" [N, C, H, W] float (N symbolic), or one input per
// named model input (a click model: dense floats, and int64 id lists that embedding layers read,
// -1 padding a shorter list; each with its name and per-example shape), and gives "logits"
// [N, classes] (what the softmax_cross_entropy layer reads) and, optionally, "probabilities"
// (their Softmax). It is an inference graph: dropout is the identity and batch_norm uses the
// moving statistics, as Model::Forward(training = false) computes.
//
// Like model_graph.h (TensorFlow's GraphDef for TensorBoard), it walks the config with the
// layers' own Configure/Setup, so shapes and TensorFlow-style SAME padding (window.h) are the
// ones training used; unlike it, it writes values too. Each layer gives its own operator
// (Layer::OnnxOp); a layer type, or a layer option, that has no ONNX form fails the export naming
// the layer and where it is in the config.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "common/config.h"
#include "common/status.h"
#include "common/tensor.h"

namespace pstrain {

struct OnnxExportOptions {
  // Also output "probabilities" = Softmax(logits) over the classes.
  bool softmax_output = true;
  // The graph's name and producer_version in the file (free-form).
  std::string graph_name;
  std::string producer_version;
};

// Where an export finds the rows of the sparse tables that embedding layers read
// (GraphOp::sparse_table): the graph holds each such table whole over the ids its input can
// carry, so that any id a served model is given has its row.
// The ids a served model is given are already hashed into [0, buckets) (HashId,
// common/data/feature_example.h); -1 pads a shorter list, and any other negative id reads as
// padding does (zeros, not counted in a mean). onnxruntime fails on an id at or past `buckets`.
struct OnnxTableRows {
  // Per id input of the model, by name: its ids lie in [0, buckets) (the feature's
  // hash_buckets).
  std::map<std::string, int64_t> buckets;
  // The rows of ids [0, n) of the table called `table`, as [n, dimension].
  std::function<Result<Tensor>(const std::string& table, int64_t n)> rows;
};

// The serialized ModelProto of `model_node` (a config's "model:") with each of its variables
// taken from `weights` (ReadTrainedWeights), and each embedding layer's table from `tables`; a
// missing variable, table or bucket count, or one of another shape, is an error naming it. Extra
// tensors (optimizer slots, an embedding's gathered rows) are ignored.
Result<std::string> ExportOnnx(const ConfigNode& model_node,
                               const std::map<std::string, Tensor>& weights,
                               const OnnxExportOptions& options, const OnnxTableRows& tables = {});

// ExportOnnx written to `path` atomically.
Status WriteOnnx(const ConfigNode& model_node, const std::map<std::string, Tensor>& weights,
                 const OnnxExportOptions& options, const std::string& path,
                 const OnnxTableRows& tables = {});

}  // namespace pstrain
