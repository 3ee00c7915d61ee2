#include "worker/training/onnx_export.h"

#include <memory>
#include <utility>
#include <vector>

#include "common/checkpoint/atomic_file.h"
#include "common/onnx/onnx.pb.h"
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
  static void Attribute(onnx::NodeProto* node, const GraphOpAttribute& attribute) {
    onnx::AttributeProto* a = node->add_attribute();
    a->set_name(attribute.name);
    switch (attribute.kind) {
      case GraphOpAttribute::Kind::kInt:
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(attribute.i);
        return;
      case GraphOpAttribute::Kind::kInts:
        a->set_type(onnx::AttributeProto::INTS);
        for (int64_t v : attribute.ints) a->add_ints(v);
        return;
      case GraphOpAttribute::Kind::kFloat:
        a->set_type(onnx::AttributeProto::FLOAT);
        a->set_f(attribute.f);
        return;
      case GraphOpAttribute::Kind::kString:
        a->set_type(onnx::AttributeProto::STRING);
        a->set_s(attribute.s);
        return;
      case GraphOpAttribute::Kind::kBool:  // ONNX has no booleans: ints 0 and 1
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(attribute.b ? 1 : 0);
        return;
      case GraphOpAttribute::Kind::kType:
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(attribute.type == GraphDataType::kInt32 ? onnx::TensorProto::INT32
                                                         : onnx::TensorProto::FLOAT);
        return;
    }
  }
  // The node of `op` named "<layer>/<op>", reading `inputs`, then its followers (op.then), each
  // reading the one before, the last one writing `output`.
  void Op(const GraphOp& op, const std::string& layer, const std::vector<std::string>& inputs,
          const std::string& output) {
    const std::string first_output = op.then.empty() ? output : layer + "/" + op.op + ":0";
    onnx::NodeProto* node = Node(op.op, layer + "/" + op.op, inputs, first_output);
    for (const GraphOpAttribute& a : op.attributes) Attribute(node, a);
    std::string previous = first_output;
    for (size_t i = 0; i < op.then.size(); ++i) {
      const GraphOp& next = op.then[i];
      const std::string next_output =
          i + 1 == op.then.size() ? output : layer + "/" + next.op + ":0";
      node = Node(next.op, layer + "/" + next.op, {previous}, next_output);
      for (const GraphOpAttribute& a : next.attributes) Attribute(node, a);
      previous = next_output;
    }
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

  for (size_t i = 0; i < layers.size(); ++i) {
    worker::Layer& layer = *layers[i];
    const GraphLayer& wired = wiring.layers[i];
    const ConfigNode spec = specs.At(i);
    // The layer's own ONNX operator, reading its inputs, then its variables.
    auto op = layer.OnnxOp();
    if (!op.ok()) return op.status().WithContext(spec.Where());
    std::vector<std::string> inputs;
    for (const std::string& in : wired.inputs)
      inputs.push_back(in == "input" ? in : OutputName(in));
    if (i + 1 == layers.size()) {  // the loss (Model::FromConfig): its input is the logits
      const int64_t classes = model->num_classes();
      out.Node("Identity", layer.name() + "/logits", {inputs[0]}, "logits");
      onnx::ValueInfoProto* logits = graph->add_output();
      logits->set_name("logits");
      SetShape(logits, {classes});
      if (options.softmax_output) {
        out.Op(*op, layer.name(), inputs, "probabilities");
        onnx::ValueInfoProto* probabilities = graph->add_output();
        probabilities->set_name("probabilities");
        SetShape(probabilities, {classes});
      }
      continue;
    }
    RETURN_IF_ERROR(AddVariables(layer, weights, &out).WithContext(spec.Where()));
    std::vector<std::string> variables;
    for (const worker::Variable& v : layer.variables()) variables.push_back(v.name);
    inputs.insert(op->variables_first ? inputs.begin() : inputs.end(), variables.begin(),
                  variables.end());
    const std::string output = OutputName(layer.name());
    out.Op(*op, layer.name(), inputs, output);
    graph->mutable_node(graph->node_size() - 1)->set_doc_string(layer.Describe());
    out.ValueInfo(output, wired.output_shape);
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
