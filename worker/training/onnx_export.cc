#include "worker/training/onnx_export.h"

#include <algorithm>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "common/checkpoint/atomic_file.h"
#include "common/onnx/onnx.pb.h"
#include "worker/network/model.h"
#include "worker/training/model_graph.h"
#include "worker/training/onnx_graph_writer.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "ONNX raw_data is little-endian; a big-endian host needs byte swaps");

namespace pstrain {
namespace {

// Opset 13: Gemm with an optional C, Softmax over one axis, BatchNormalization without the
// training outputs, ReduceSum's axes as an input (ReduceMean's are still an attribute). IR
// version 7 is the one opset 13 came with, so older runtimes read it too.
constexpr int64_t kOpset = 13;
constexpr int64_t kIrVersion = 7;

// A layer's output tensor: TensorFlow's "<op>:0", which no layer or variable name can equal and
// which leaves "logits" and "probabilities" free for the graph's outputs.
std::string OutputName(const std::string& layer) { return layer + ":0"; }

// The variables of `layer` from `first` on, from `weights`, as initializers under their names.
Status AddVariables(worker::Layer& layer, const std::map<std::string, Tensor>& weights,
                    size_t first, OnnxGraphWriter* out) {
  for (size_t k = first; k < layer.variables().size(); ++k) {
    const worker::Variable& v = layer.variables()[k];
    auto it = weights.find(v.name);
    if (it == weights.end()) {
      return NotFound(layer.Describe() + ": variable '" + v.name + "' is not in the weights");
    }
    if (it->second.shape() != v.value.shape()) {
      return InvalidArgument(layer.Describe() + ": variable '" + v.name + "' is " +
                             it->second.shape().ToString() + " in the weights, the config makes " +
                             v.value.shape().ToString());
    }
    out->Initializer(v.name, it->second);
  }
  return Status::OK();
}

// In the place of `layer`'s variable 0, the sparse table `table` over the ids of model input
// `input`, as GraphOp::sparse_table lays it out: [1 + buckets, dimension], row 0 zeros.
Status AddTable(worker::Layer& layer, const std::string& table, const std::string& input,
                const OnnxTableRows& tables, OnnxGraphWriter* out) {
  auto buckets = tables.buckets.find(input);
  if (buckets == tables.buckets.end() || buckets->second < 1) {
    return NotFound(layer.Describe() + " reads sparse table '" + table +
                    "' and the export has no bucket count (>= 1) for its id input '" + input +
                    "' (the feature's hash_buckets)");
  }
  if (!tables.rows) {
    return FailedPrecondition(layer.Describe() + " reads sparse table '" + table +
                              "' and the export was given no table rows");
  }
  const worker::Variable& rows_variable = layer.variables().at(0);
  const int64_t n = buckets->second, d = rows_variable.value.shape().dim(1);
  auto rows = tables.rows(table, n);
  if (!rows.ok()) return rows.status().WithContext(layer.Describe());
  if (rows->shape() != Shape{n, d}) {
    return InvalidArgument(layer.Describe() + ": table '" + table + "' gave rows " +
                           rows->shape().ToString() + ", the layer reads " +
                           Shape{n, d}.ToString() + " (ids [0, " + std::to_string(n) + "))");
  }
  Tensor padded(Shape{1 + n, d});  // row 0 stays zero: what padding reads
  std::copy(rows->data(), rows->data() + rows->size(), padded.data() + d);
  out->Initializer(rows_variable.name, padded);
  return Status::OK();
}

// The model's inputs as graph inputs: each named input with its element type and shape.
void AddInputs(const GraphModel& wiring, onnx::GraphProto* graph) {
  for (const GraphInput& in : wiring.inputs) {
    onnx::ValueInfoProto* value = graph->add_input();
    value->set_name(in.name);
    SetOnnxShape(value, in.shape, OnnxElementType(in.type));
  }
}

// One layer but the loss: its variables (or table) and its operators.
Status AddLayer(worker::Layer& layer, const GraphOp& op, const GraphLayer& wired,
                const std::vector<std::string>& inputs,
                const std::map<std::string, Tensor>& weights, const OnnxTableRows& tables,
                OnnxGraphWriter* out) {
  const bool reads_table = !op.sparse_table.empty();
  if (reads_table) {
    if (inputs[0] != wired.inputs[0]) {  // a layer's output, not a model input
      return InvalidArgument(layer.Describe() + " reads its ids from layer '" + wired.inputs[0] +
                             "'; an exported table is indexed by a model input");
    }
    RETURN_IF_ERROR(AddTable(layer, op.sparse_table, inputs[0], tables, out));
  }
  RETURN_IF_ERROR(AddVariables(layer, weights, reads_table ? 1 : 0, out));
  std::vector<std::string> variables;
  for (const worker::Variable& v : layer.variables()) variables.push_back(v.name);
  std::vector<std::string> defaults = inputs;
  defaults.insert(op.variables_first ? defaults.begin() : defaults.end(), variables.begin(),
                  variables.end());
  const std::string output = OutputName(layer.name());
  RETURN_IF_ERROR(out->Chain(op, layer.name(), inputs, variables, defaults, output));
  out->ValueInfo(output, wired.output_shape);
  return Status::OK();
}

// The loss layer (Model::FromConfig puts it last): "logits" is its input, "probabilities" its
// operator on them.
Status AddOutputs(const worker::Model& model, const worker::Layer& loss, const GraphOp& op,
                  const std::string& logits, const OnnxExportOptions& options,
                  onnx::GraphProto* graph, OnnxGraphWriter* out) {
  const int64_t classes = model.num_classes();
  out->Node("Identity", loss.name() + "/logits", {logits}, "logits");
  onnx::ValueInfoProto* value = graph->add_output();
  value->set_name("logits");
  SetOnnxShape(value, {classes});
  if (!options.softmax_output) return Status::OK();
  RETURN_IF_ERROR(out->Chain(op, loss.name(), {logits}, {}, {logits}, "probabilities"));
  value = graph->add_output();
  value->set_name("probabilities");
  SetOnnxShape(value, {classes});
  return Status::OK();
}

}  // namespace

Result<std::string> ExportOnnx(const ConfigNode& model_node,
                               const std::map<std::string, Tensor>& weights,
                               const OnnxExportOptions& options, const OnnxTableRows& tables) {
  // The layers as training builds them (shapes, geometry, variables; the loss layer last) and
  // their wiring as the TensorBoard graph reads it.
  ASSIGN_OR_RETURN(std::unique_ptr<worker::Model> model, worker::Model::FromConfig(model_node));
  ASSIGN_OR_RETURN(GraphModel wiring, DescribeModel(model_node, ModelGraphOptions{}));
  const auto& layers = model->layers();
  if (wiring.layers.size() != layers.size()) {
    return Internal("the model has " + std::to_string(layers.size()) + " layers, its graph " +
                    std::to_string(wiring.layers.size()));
  }
  ASSIGN_OR_RETURN(ConfigNode specs, model_node.Child("layers"));

  onnx::ModelProto proto;
  proto.set_ir_version(kIrVersion);
  proto.set_producer_name("pstrain");
  proto.set_producer_version(options.producer_version);
  proto.set_doc_string("pstrain model '" + model->name() + "' for inference");
  onnx::OperatorSetIdProto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  onnx::GraphProto* graph = proto.mutable_graph();
  graph->set_name(options.graph_name.empty() ? model->name() : options.graph_name);
  AddInputs(wiring, graph);
  std::set<std::string> model_inputs;
  for (const GraphInput& in : wiring.inputs) model_inputs.insert(in.name);
  OnnxGraphWriter out(graph);

  for (size_t i = 0; i < layers.size(); ++i) {
    worker::Layer& layer = *layers[i];
    const GraphLayer& wired = wiring.layers[i];
    const ConfigNode spec = specs.At(i);
    // The layer's own ONNX operator, reading its inputs, then its variables.
    auto op = layer.OnnxOp();
    if (!op.ok()) return op.status().WithContext(spec.Where());
    std::vector<std::string> inputs;
    for (const std::string& in : wired.inputs) {
      inputs.push_back(model_inputs.count(in) ? in : OutputName(in));
    }
    const Status added = i + 1 == layers.size()
                             ? AddOutputs(*model, layer, *op, inputs[0], options, graph, &out)
                             : AddLayer(layer, *op, wired, inputs, weights, tables, &out);
    if (!added.ok()) return added.WithContext(spec.Where());
    graph->mutable_node(graph->node_size() - 1)->set_doc_string(layer.Describe());
  }
  onnx::StringStringEntryProto* name = proto.add_metadata_props();
  name->set_key("pstrain.model");
  name->set_value(model->name());
  std::string bytes;
  if (!proto.SerializeToString(&bytes)) {
    return Internal("serializing the ONNX model failed (is it over protobuf's 2 GiB?)");
  }
  return bytes;
}

Status WriteOnnx(const ConfigNode& model_node, const std::map<std::string, Tensor>& weights,
                 const OnnxExportOptions& options, const std::string& path,
                 const OnnxTableRows& tables) {
  ASSIGN_OR_RETURN(std::string bytes, ExportOnnx(model_node, weights, options, tables));
  return WriteFileAtomically(path, bytes);
}

}  // namespace pstrain
