#include "common/summary/graph_def.h"

#include <map>

namespace pstrain {
namespace {

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

tensorflow::DataType DataType(GraphDataType type) {
  switch (type) {
    case GraphDataType::kFloat:
      return tensorflow::DT_FLOAT;
    case GraphDataType::kInt32:
      return tensorflow::DT_INT32;
  }
  return tensorflow::DT_INVALID;
}

void SetAttribute(tensorflow::NodeDef* node, const GraphOpAttribute& a) {
  tensorflow::AttrValue& value = (*node->mutable_attr())[a.name];
  switch (a.kind) {
    case GraphOpAttribute::Kind::kInt:
      value.set_i(a.i);
      return;
    case GraphOpAttribute::Kind::kInts:
      for (int64_t v : a.ints) value.mutable_list()->add_i(v);
      return;
    case GraphOpAttribute::Kind::kFloat:
      value.set_f(a.f);
      return;
    case GraphOpAttribute::Kind::kString:
      value.set_s(a.s);
      return;
    case GraphOpAttribute::Kind::kBool:
      value.set_b(a.b);
      return;
    case GraphOpAttribute::Kind::kType:
      value.set_type(DataType(a.type));
      return;
  }
}

const std::string& OpName(const GraphLayer& layer) {
  return layer.op.op.empty() ? layer.type : layer.op.op;
}

}  // namespace

std::string LayerNodeName(const GraphLayer& layer) { return layer.name + "/" + OpName(layer); }

tensorflow::GraphDef BuildGraphDef(const GraphModel& model) {
  tensorflow::GraphDef graph;
  AddPlaceholder(&graph, kInput, tensorflow::DT_FLOAT, Batched(model.input_shape),
                 model.worker_device);
  AddPlaceholder(&graph, kLabels, tensorflow::DT_INT32, {-1}, model.worker_device);
  std::map<std::string, std::string> node_of = {{kInput, kInput}};  // layer -> its node
  for (const GraphLayer& layer : model.layers) {
    std::vector<std::string> inputs;
    for (const std::string& in : layer.inputs) {
      auto it = node_of.find(in);
      inputs.push_back(it == node_of.end() ? in : it->second);
    }
    std::vector<std::string> variables;  // the layer's inputs' place, or before them
    std::vector<std::string>& reads = layer.op.variables_first ? variables : inputs;
    for (const GraphLayer::Variable& v : layer.variables) {
      for (const GraphVariable& part : v.partitions) AddVariable(&graph, part);
      if (v.partitions.size() == 1) {
        reads.push_back(v.partitions[0].name);
        continue;
      }
      // TensorFlow's PartitionedVariable reads as the concatenation of its parts.
      const std::string concat = v.name + "/ConcatPartitions/concat";
      tensorflow::NodeDef* node = AddNode(&graph, concat, "ConcatV2", model.worker_device, v.shape);
      for (const GraphVariable& part : v.partitions) node->add_input(part.name);
      SetType(node, "T", tensorflow::DT_FLOAT);
      (*node->mutable_attr())["N"].set_i(static_cast<int64_t>(v.partitions.size()));
      reads.push_back(concat);
    }
    inputs.insert(inputs.begin(), variables.begin(), variables.end());
    if (layer.op.reads_labels) inputs.push_back(kLabels);
    std::string name = LayerNodeName(layer);
    tensorflow::NodeDef* node =
        AddNode(&graph, name, OpName(layer), model.worker_device, Batched(layer.output_shape));
    for (const std::string& in : inputs) node->add_input(in);
    SetType(node, "T", tensorflow::DT_FLOAT);
    for (const GraphOpAttribute& a : layer.op.attributes) SetAttribute(node, a);
    for (const GraphOp& next : layer.op.then) {  // each reads the one before; shapes: the last's
      node->mutable_attr()->erase("_output_shapes");
      const std::string input = name;
      name = layer.name + "/" + next.op;
      node = AddNode(&graph, name, next.op, model.worker_device, Batched(layer.output_shape));
      node->add_input(input);
      SetType(node, "T", tensorflow::DT_FLOAT);
      for (const GraphOpAttribute& a : next.attributes) SetAttribute(node, a);
    }
    node_of[layer.name] = name;
  }
  return graph;
}

}  // namespace pstrain
