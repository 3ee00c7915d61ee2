#include "common/summary/graph_def.h"

#include <map>

namespace pstrain {
namespace {

struct OpInfo {
  const char* op;
  bool nchw;          // has a spatial layout: written with data_format "NCHW"
  bool reads_labels;  // a loss: also reads the "labels" placeholder
};

// pstrain's layer types and the TensorFlow operation each computes (with its bias, activation
// or statistics folded in). Dropout is a subgraph in TensorFlow; it keeps Keras's layer name.
const std::map<std::string, OpInfo>& Ops() {
  static const auto* ops = new std::map<std::string, OpInfo>{
      {"conv2d", {"Conv2D", true, false}},
      {"conv2d_transpose", {"Conv2DBackpropInput", true, false}},  // tf.nn.conv2d_transpose
      {"max_pool", {"MaxPool", true, false}},
      {"avg_pool", {"AvgPool", true, false}},
      {"relu", {"Relu", false, false}},
      {"flatten", {"Reshape", false, false}},
      {"fully_connected", {"MatMul", false, false}},
      {"dropout", {"Dropout", false, false}},
      {"add", {"AddV2", false, false}},
      {"batch_norm", {"FusedBatchNormV3", true, false}},
      {"softmax_cross_entropy", {"SparseSoftmaxCrossEntropyWithLogits", false, true}},
  };
  return *ops;
}

constexpr char kInput[] = "input";
constexpr char kLabels[] = "labels";

tensorflow::TensorShapeProto ShapeProto(const std::vector<int64_t>& dims) {
  tensorflow::TensorShapeProto shape;
  for (int64_t d : dims) shape.add_dim()->set_size(d);
  return shape;
}

std::vector<int64_t> Batched(const std::vector<int64_t>& per_example) {
  std::vector<int64_t> dims = {-1};
  dims.insert(dims.end(), per_example.begin(), per_example.end());
  return dims;
}

tensorflow::NodeDef* AddNode(tensorflow::GraphDef* graph, const std::string& name,
                             const std::string& op, const std::string& device,
                             const std::vector<int64_t>& output_shape) {
  tensorflow::NodeDef* node = graph->add_node();
  node->set_name(name);
  node->set_op(op);
  node->set_device(device);
  // One shape per output, as TensorFlow writes "_output_shapes"; ours have one output each.
  *(*node->mutable_attr())["_output_shapes"].mutable_list()->add_shape() = ShapeProto(output_shape);
  return node;
}

void SetType(tensorflow::NodeDef* node, const std::string& key, tensorflow::DataType type) {
  (*node->mutable_attr())[key].set_type(type);
}

void AddPlaceholder(tensorflow::GraphDef* graph, const std::string& name, tensorflow::DataType type,
                    const std::vector<int64_t>& shape, const std::string& device) {
  tensorflow::NodeDef* node = AddNode(graph, name, "Placeholder", device, shape);
  SetType(node, "dtype", type);
  *(*node->mutable_attr())["shape"].mutable_shape() = ShapeProto(shape);
}

void AddVariable(tensorflow::GraphDef* graph, const GraphVariable& v) {
  tensorflow::NodeDef* node = AddNode(graph, v.name, "VariableV2", v.device, v.shape);
  SetType(node, "dtype", tensorflow::DT_FLOAT);
  *(*node->mutable_attr())["shape"].mutable_shape() = ShapeProto(v.shape);
  (*node->mutable_attr())["container"].set_s("");
  (*node->mutable_attr())["shared_name"].set_s("");
}

}  // namespace

std::string TensorFlowOp(const std::string& layer_type) {
  auto it = Ops().find(layer_type);
  return it == Ops().end() ? layer_type : it->second.op;
}

std::string LayerNodeName(const GraphLayer& layer) {
  return layer.name + "/" + TensorFlowOp(layer.type);
}

tensorflow::GraphDef BuildGraphDef(const GraphModel& model) {
  tensorflow::GraphDef graph;
  AddPlaceholder(&graph, kInput, tensorflow::DT_FLOAT, Batched(model.input_shape),
                 model.worker_device);
  AddPlaceholder(&graph, kLabels, tensorflow::DT_INT32, {-1}, model.worker_device);
  std::map<std::string, std::string> node_of = {{kInput, kInput}};  // layer -> its node
  for (const GraphLayer& layer : model.layers) {
    const auto op = Ops().find(layer.type);
    std::vector<std::string> inputs;
    for (const std::string& in : layer.inputs) {
      auto it = node_of.find(in);
      inputs.push_back(it == node_of.end() ? in : it->second);
    }
    for (const GraphLayer::Variable& v : layer.variables) {
      for (const GraphVariable& part : v.partitions) AddVariable(&graph, part);
      if (v.partitions.size() == 1) {
        inputs.push_back(v.partitions[0].name);
        continue;
      }
      // TensorFlow's PartitionedVariable reads as the concatenation of its parts.
      const std::string concat = v.name + "/ConcatPartitions/concat";
      tensorflow::NodeDef* node = AddNode(&graph, concat, "ConcatV2", model.worker_device, v.shape);
      for (const GraphVariable& part : v.partitions) node->add_input(part.name);
      SetType(node, "T", tensorflow::DT_FLOAT);
      (*node->mutable_attr())["N"].set_i(static_cast<int64_t>(v.partitions.size()));
      inputs.push_back(concat);
    }
    if (op != Ops().end() && op->second.reads_labels) inputs.push_back(kLabels);
    const std::string name = LayerNodeName(layer);
    tensorflow::NodeDef* node = AddNode(&graph, name, TensorFlowOp(layer.type), model.worker_device,
                                        Batched(layer.output_shape));
    for (const std::string& in : inputs) node->add_input(in);
    SetType(node, "T", tensorflow::DT_FLOAT);
    if (op != Ops().end() && op->second.nchw) (*node->mutable_attr())["data_format"].set_s("NCHW");
    node_of[layer.name] = name;
  }
  return graph;
}

}  // namespace pstrain
