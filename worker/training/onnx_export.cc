#include "worker/training/onnx_export.h"

#include <memory>
#include <utility>
#include <vector>

#include "common/checkpoint/atomic_file.h"
#include "common/onnx/onnx.pb.h"
#include "worker/network/layers/conv2d.h"
#include "worker/network/layers/conv2d_transpose.h"
#include "worker/network/layers/window.h"
#include "worker/network/model.h"
#include "worker/training/model_graph.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "ONNX raw_data is little-endian; a big-endian host needs byte swaps");

namespace pstrain {
namespace {

// Opset 13: Gemm with an optional C, Softmax over one axis, BatchNormalization without the
// training outputs. IR version 7 is the one opset 13 came with, so older runtimes read it too.
constexpr int64_t kOpset = 13;
constexpr int64_t kIrVersion = 7;
constexpr char kBatchDim[] = "N";

// A layer's output tensor: TensorFlow's "<op>:0", which no layer or variable name can equal and
// which leaves "logits" and "probabilities" free for the graph's outputs.
std::string OutputName(const std::string& layer) { return layer + ":0"; }

void SetShape(onnx::ValueInfoProto* value, const std::vector<int64_t>& per_example) {
  auto* tensor = value->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx::TensorProto::FLOAT);
  auto* shape = tensor->mutable_shape();
  shape->add_dim()->set_dim_param(kBatchDim);
  for (int64_t d : per_example) shape->add_dim()->set_dim_value(d);
}

// Appends nodes and initializers to one GraphProto.
class GraphWriter {
 public:
  explicit GraphWriter(onnx::GraphProto* graph) : graph_(graph) {}

  onnx::NodeProto* Node(const std::string& op, const std::string& name,
                        const std::vector<std::string>& inputs, const std::string& output) {
    onnx::NodeProto* node = graph_->add_node();
    node->set_op_type(op);
    node->set_name(name);
    for (const std::string& in : inputs) node->add_input(in);
    node->add_output(output);
    return node;
  }
  static void Int(onnx::NodeProto* node, const std::string& name, int64_t value) {
    onnx::AttributeProto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
  }
  static void Ints(onnx::NodeProto* node, const std::string& name,
                   const std::vector<int64_t>& values) {
    onnx::AttributeProto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values) a->add_ints(v);
  }
  static void Float(onnx::NodeProto* node, const std::string& name, float value) {
    onnx::AttributeProto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(value);
  }
  void Initializer(const std::string& name, const Tensor& value) {
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : value.shape().dims()) t->add_dims(d);
    t->set_raw_data(value.data(), value.bytes());
  }
  void ValueInfo(const std::string& name, const std::vector<int64_t>& per_example) {
    onnx::ValueInfoProto* v = graph_->add_value_info();
    v->set_name(name);
    SetShape(v, per_example);
  }

 private:
  onnx::GraphProto* graph_;
};

// One layer as ONNX sees it: its config, the built layer, its input tensors and shapes.
struct LayerToExport {
  const ConfigNode& spec;
  worker::Layer& layer;
  std::vector<std::string> inputs;              // tensor names
  std::vector<std::vector<int64_t>> in_shapes;  // per example
  std::vector<int64_t> out_shape;               // per example
  std::string output;                           // tensor name
};

Status Unsupported(const LayerToExport& l, const std::string& why) {
  return l.spec.Error(l.layer.Describe() + ": no ONNX form for " + why);
}

// A disagreement between the ONNX operator's output size and the layer's own: a bug here, not
// in the config; stops the export rather than writing a model that computes something else.
Status CheckSize(const LayerToExport& l, const char* axis, int64_t onnx, int64_t layer) {
  if (onnx == layer) return Status::OK();
  return Internal(l.layer.Describe() + ": the ONNX operator's output " + axis + " would be " +
                  std::to_string(onnx) + ", the layer's is " + std::to_string(layer));
}

bool HasVariable(worker::Layer& layer, const std::string& short_name) {
  for (const worker::Variable& v : layer.variables()) {
    if (v.name == layer.name() + "/" + short_name) return true;
  }
  return false;
}

// Conv's output size with explicit pads (floor, as ONNX computes it).
int64_t ConvOut(int64_t in, int64_t kernel, int64_t stride, const worker::Window1D& w) {
  return (in + w.pad_before + w.pad_after - kernel) / stride + 1;
}

Status ExportConv2D(const LayerToExport& l, GraphWriter* out) {
  auto* conv = dynamic_cast<worker::Conv2D*>(&l.layer);
  if (!conv) return Unsupported(l, "a conv2d that is not pstrain's Conv2D");
  const worker::Conv2D::Geometry& g = conv->geometry();
  RETURN_IF_ERROR(CheckSize(l, "height", ConvOut(g.in_h, g.kh, g.sh, g.wh), g.out_h));
  RETURN_IF_ERROR(CheckSize(l, "width", ConvOut(g.in_w, g.kw, g.sw, g.ww), g.out_w));
  std::vector<std::string> in = {l.inputs[0], l.layer.name() + "/weights"};
  if (conv->has_bias()) in.push_back(l.layer.name() + "/bias");
  onnx::NodeProto* node = out->Node("Conv", l.layer.name() + "/Conv", in, l.output);
  GraphWriter::Ints(node, "kernel_shape", {g.kh, g.kw});
  GraphWriter::Ints(node, "strides", {g.sh, g.sw});
  // TensorFlow's SAME puts the odd pixel after: explicit, possibly asymmetric pads.
  GraphWriter::Ints(node, "pads",
                    {g.wh.pad_before, g.ww.pad_before, g.wh.pad_after, g.ww.pad_after});
  GraphWriter::Ints(node, "dilations", {1, 1});
  GraphWriter::Int(node, "group", 1);
  return Status::OK();
}

// ConvTranspose's (begin, end) pads and output_padding along one axis for the layer's output
// size: the full transposed convolution is (in - 1) * stride + kernel long; the conv2d's
// pad_before is cropped at the start, and the end is cropped (pads) or extended (output_padding,
// positions no window reaches, which get only the bias) to the layer's size.
struct TransposeAxis {
  int64_t pad_begin, pad_end, output_padding;
};
TransposeAxis TransposePads(int64_t in, int64_t kernel, int64_t stride, int64_t out,
                            const worker::Window1D& w) {
  const int64_t full = (in - 1) * stride + kernel;
  const int64_t end = full - w.pad_before - out;
  return end >= 0 ? TransposeAxis{w.pad_before, end, 0} : TransposeAxis{w.pad_before, 0, -end};
}

Status ExportConv2DTranspose(const LayerToExport& l, GraphWriter* out) {
  auto* deconv = dynamic_cast<worker::Conv2DTranspose*>(&l.layer);
  if (!deconv) return Unsupported(l, "a conv2d_transpose that is not pstrain's Conv2DTranspose");
  const worker::Conv2DTranspose::Geometry& g = deconv->geometry();
  const TransposeAxis h = TransposePads(g.in_h, g.kh, g.sh, g.out_h, g.wh);
  const TransposeAxis w = TransposePads(g.in_w, g.kw, g.sw, g.out_w, g.ww);
  if (h.output_padding >= g.sh || w.output_padding >= g.sw) {  // ONNX requires < stride
    return Unsupported(l, "an output " + std::to_string(g.out_h) + "x" + std::to_string(g.out_w) +
                              " this far beyond the transposed convolution's reach");
  }
  // Weights [in_channels, filters, kh, kw] are ONNX's ConvTranspose layout (C, M/group, kH, kW).
  std::vector<std::string> in = {l.inputs[0], l.layer.name() + "/weights"};
  if (HasVariable(l.layer, "bias")) in.push_back(l.layer.name() + "/bias");
  onnx::NodeProto* node =
      out->Node("ConvTranspose", l.layer.name() + "/ConvTranspose", in, l.output);
  GraphWriter::Ints(node, "kernel_shape", {g.kh, g.kw});
  GraphWriter::Ints(node, "strides", {g.sh, g.sw});
  GraphWriter::Ints(node, "pads", {h.pad_begin, w.pad_begin, h.pad_end, w.pad_end});
  GraphWriter::Ints(node, "output_padding", {h.output_padding, w.output_padding});
  GraphWriter::Ints(node, "dilations", {1, 1});
  GraphWriter::Int(node, "group", 1);
  return Status::OK();
}

Status ExportPool(const LayerToExport& l, bool max, GraphWriter* out) {
  // Pool2D keeps its fields private: read them as Pool2D::Configure does (stride defaults to
  // the size, padding to VALID), then check the result against the layer's own output shape.
  ASSIGN_OR_RETURN(std::vector<int64_t> size, worker::ReadPair(l.spec, "size", 2));
  ASSIGN_OR_RETURN(std::vector<int64_t> stride, worker::ReadPair(l.spec, "stride", size[0]));
  if (!l.spec.Has("stride")) stride = size;
  ASSIGN_OR_RETURN(worker::Padding padding,
                   worker::ReadPadding(l.spec, "padding", worker::Padding::kValid));
  const std::vector<int64_t>& s = l.in_shapes[0];
  ASSIGN_OR_RETURN(worker::Window1D wh, worker::ComputeWindow(s[1], size[0], stride[0], padding));
  ASSIGN_OR_RETURN(worker::Window1D ww, worker::ComputeWindow(s[2], size[1], stride[1], padding));
  RETURN_IF_ERROR(CheckSize(l, "height", ConvOut(s[1], size[0], stride[0], wh), l.out_shape[1]));
  RETURN_IF_ERROR(CheckSize(l, "width", ConvOut(s[2], size[1], stride[1], ww), l.out_shape[2]));
  const std::string op = max ? "MaxPool" : "AveragePool";
  onnx::NodeProto* node = out->Node(op, l.layer.name() + "/" + op, {l.inputs[0]}, l.output);
  GraphWriter::Ints(node, "kernel_shape", size);
  GraphWriter::Ints(node, "strides", stride);
  GraphWriter::Ints(node, "pads", {wh.pad_before, ww.pad_before, wh.pad_after, ww.pad_after});
  // TensorFlow's SAME average divides by the real pixels only (MaxPool ignores pads anyway).
  if (!max) GraphWriter::Int(node, "count_include_pad", 0);
  return Status::OK();
}

Status ExportFullyConnected(const LayerToExport& l, GraphWriter* out) {
  // y = x W^T + b with W [units, features]: Gemm with transB.
  std::vector<std::string> in = {l.inputs[0], l.layer.name() + "/weights"};
  if (HasVariable(l.layer, "bias")) in.push_back(l.layer.name() + "/bias");
  onnx::NodeProto* node = out->Node("Gemm", l.layer.name() + "/Gemm", in, l.output);
  GraphWriter::Int(node, "transB", 1);
  return Status::OK();
}

Status ExportBatchNorm(const LayerToExport& l, GraphWriter* out) {
  // BatchNorm keeps epsilon private: read it as BatchNorm::Configure does (TF's 1e-3 by
  // default), rounded to float as the layer holds it.
  ASSIGN_OR_RETURN(double epsilon, l.spec.GetDouble("epsilon", 1e-3));
  const std::string& n = l.layer.name();
  // Channels of [N, C, H, W] or features of [N, F] (after a flatten): both are ONNX's axis 1.
  onnx::NodeProto* node = out->Node(
      "BatchNormalization", n + "/BatchNormalization",
      {l.inputs[0], n + "/gamma", n + "/beta", n + "/moving_mean", n + "/moving_variance"},
      l.output);
  GraphWriter::Float(node, "epsilon", static_cast<float>(epsilon));
  return Status::OK();
}

Status ExportLayer(const LayerToExport& l, GraphWriter* out) {
  const std::string& type = l.layer.type();
  const std::string& n = l.layer.name();
  if (type == "conv2d") return ExportConv2D(l, out);
  if (type == "conv2d_transpose") return ExportConv2DTranspose(l, out);
  if (type == "max_pool" || type == "avg_pool") return ExportPool(l, type == "max_pool", out);
  if (type == "fully_connected") return ExportFullyConnected(l, out);
  if (type == "batch_norm") return ExportBatchNorm(l, out);
  if (type == "relu") {
    out->Node("Relu", n + "/Relu", l.inputs, l.output);
  } else if (type == "add") {
    out->Node("Add", n + "/Add", l.inputs, l.output);
  } else if (type == "flatten") {
    GraphWriter::Int(out->Node("Flatten", n + "/Flatten", l.inputs, l.output), "axis", 1);
  } else if (type == "dropout") {  // the identity in inference
    out->Node("Identity", n + "/Identity", l.inputs, l.output);
  } else {
    return Unsupported(l, "layer type '" + type +
                              "' (pstrain-export knows conv2d, conv2d_transpose, max_pool, "
                              "avg_pool, relu, flatten, dropout, add, fully_connected, "
                              "batch_norm and softmax_cross_entropy)");
  }
  return Status::OK();
}

// Every variable of `layer` from `weights`, as initializers under the variable's name.
Status AddVariables(worker::Layer& layer, const std::map<std::string, Tensor>& weights,
                    GraphWriter* out) {
  for (const worker::Variable& v : layer.variables()) {
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

}  // namespace

Result<std::string> ExportOnnx(const ConfigNode& model_node,
                               const std::map<std::string, Tensor>& weights,
                               const OnnxExportOptions& options) {
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
  SetShape(graph->add_input(), model->input_shape().dims());
  graph->mutable_input(0)->set_name("input");
  GraphWriter out(graph);

  std::map<std::string, std::vector<int64_t>> shapes = {{"input", model->input_shape().dims()}};
  for (size_t i = 0; i < layers.size(); ++i) {
    worker::Layer& layer = *layers[i];
    const GraphLayer& wired = wiring.layers[i];
    const ConfigNode spec = specs.At(i);
    LayerToExport l{spec, layer, {}, {}, wired.output_shape, OutputName(layer.name())};
    for (const std::string& in : wired.inputs) {
      l.inputs.push_back(in == "input" ? in : OutputName(in));
      l.in_shapes.push_back(shapes.at(in));
    }
    shapes[layer.name()] = wired.output_shape;
    if (layer.type() == "softmax_cross_entropy") {  // Model::FromConfig: the last layer, once
      const int64_t classes = model->num_classes();
      out.Node("Identity", layer.name() + "/logits", {l.inputs[0]}, "logits");
      onnx::ValueInfoProto* logits = graph->add_output();
      logits->set_name("logits");
      SetShape(logits, {classes});
      if (options.softmax_output) {
        GraphWriter::Int(
            out.Node("Softmax", layer.name() + "/Softmax", {l.inputs[0]}, "probabilities"), "axis",
            1);
        onnx::ValueInfoProto* probabilities = graph->add_output();
        probabilities->set_name("probabilities");
        SetShape(probabilities, {classes});
      }
      continue;
    }
    RETURN_IF_ERROR(AddVariables(layer, weights, &out).WithContext(l.spec.Where()));
    const int nodes_before = graph->node_size();
    RETURN_IF_ERROR(ExportLayer(l, &out));
    for (int k = nodes_before; k < graph->node_size(); ++k) {
      graph->mutable_node(k)->set_doc_string(layer.Describe());
    }
    out.ValueInfo(l.output, l.out_shape);
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
                 const OnnxExportOptions& options, const std::string& path) {
  ASSIGN_OR_RETURN(std::string bytes, ExportOnnx(model_node, weights, options));
  return WriteFileAtomically(path, bytes);
}

}  // namespace pstrain
