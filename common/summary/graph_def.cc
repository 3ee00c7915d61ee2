#include "common/summary/graph_def.h"

#include <glog/logging.h>

#include <map>

namespace pstrain {
namespace {

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
    case GraphDataType::kInt64:
      return tensorflow::DT_INT64;
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

// A Const node holding `c`.
void AddConstant(tensorflow::GraphDef* graph, const std::string& name, const GraphConstant& c,
                 const std::string& device) {
  tensorflow::NodeDef* node = AddNode(graph, name, "Const", device, c.dims);
  SetType(node, "dtype", DataType(c.type));
  tensorflow::TensorProto* t = (*node->mutable_attr())["value"].mutable_tensor();
  t->set_dtype(DataType(c.type));
  *t->mutable_tensor_shape() = ShapeProto(c.dims);
  for (double v : c.values) {
    switch (c.type) {
      case GraphDataType::kFloat:
        t->add_float_val(static_cast<float>(v));
        break;
      case GraphDataType::kInt32:
        t->add_int_val(static_cast<int32_t>(v));
        break;
      case GraphDataType::kInt64:
        t->add_int64_val(static_cast<int64_t>(v));
        break;
    }
  }
}

// Element k of what an op may read (`what`: "input", "variable", "op"); a GraphOp naming one its
// layer lacks is the layer's bug.
const std::string& Read(const std::vector<std::string>& names, int k, const char* what,
                        const GraphLayer& layer) {
  CHECK(k >= 0 && k < static_cast<int>(names.size()))
      << "layer '" << layer.name << "': its TensorFlow op reads " << what << " " << k << ", it has "
      << names.size();
  return names[k];
}

// Writes a layer's ops (its chain), each reading what GraphOp::reads lists or, without a list,
// the first `defaults` (its inputs and variables) and each follower the op before; returns the
// last op's node name.
std::string AddChain(tensorflow::GraphDef* graph, const GraphLayer& layer,
                     const std::vector<std::string>& inputs,
                     const std::vector<std::string>& variables,
                     const std::vector<std::string>& defaults, const std::string& device) {
  std::vector<const GraphOp*> ops = {&layer.op};
  for (const GraphOp& next : layer.op.then) ops.push_back(&next);
  std::vector<std::string> names;  // per op of the chain, its node
  tensorflow::NodeDef* node = nullptr;
  for (size_t m = 0; m < ops.size(); ++m) {
    const GraphOp& op = *ops[m];
    const std::string name = m == 0 ? LayerNodeName(layer) : layer.name + "/" + op.NodeName();
    std::vector<std::string> reads;
    if (op.reads.empty()) {
      reads = m == 0 ? defaults : std::vector<std::string>{names.back()};
    }
    for (size_t r = 0; r < op.reads.size(); ++r) {
      const GraphOpInput& in = op.reads[r];
      const int k = in.index;
      switch (in.kind) {
        case GraphOpInput::Kind::kLayerInput:
          reads.push_back(Read(inputs, k, "input", layer));
          break;
        case GraphOpInput::Kind::kVariable:
          reads.push_back(Read(variables, k, "variable", layer));
          break;
        case GraphOpInput::Kind::kOp:
          reads.push_back(Read(names, k, "op", layer));
          break;
        case GraphOpInput::Kind::kConstant:
          reads.push_back(name + "/const_" + std::to_string(r));
          AddConstant(graph, reads.back(), in.constant, device);
          break;
      }
    }
    // Shapes: the last op's, the layer's output.
    if (node != nullptr) node->mutable_attr()->erase("_output_shapes");
    node = AddNode(graph, name, m == 0 && op.op.empty() ? layer.type : op.op, device,
                   Batched(layer.output_shape));
    for (const std::string& in : reads) node->add_input(in);
    if (op.has_t) SetType(node, "T", tensorflow::DT_FLOAT);
    for (const GraphOpAttribute& a : op.attributes) SetAttribute(node, a);
    names.push_back(name);
  }
  return names.back();
}

const std::string& OpName(const GraphLayer& layer) {
  return layer.op.op.empty() ? layer.type : layer.op.NodeName();
}

}  // namespace

std::string LayerNodeName(const GraphLayer& layer) { return layer.name + "/" + OpName(layer); }

tensorflow::GraphDef BuildGraphDef(const GraphModel& model) {
  tensorflow::GraphDef graph;
  std::map<std::string, std::string> node_of;  // model input or layer -> its node
  for (const GraphInput& in : model.inputs) {
    AddPlaceholder(&graph, in.name, DataType(in.type), Batched(in.shape), model.worker_device);
    node_of[in.name] = in.name;
  }
  AddPlaceholder(&graph, kLabels, tensorflow::DT_INT32, {-1}, model.worker_device);
  for (const GraphLayer& layer : model.layers) {
    std::vector<std::string> inputs;
    for (const std::string& in : layer.inputs) {
      auto it = node_of.find(in);
      inputs.push_back(it == node_of.end() ? in : it->second);
    }
    std::vector<std::string> variables;
    for (const GraphLayer::Variable& v : layer.variables) {
      for (const GraphVariable& part : v.partitions) AddVariable(&graph, part);
      if (v.partitions.size() == 1) {
        variables.push_back(v.partitions[0].name);
        continue;
      }
      // TensorFlow's PartitionedVariable reads as the concatenation of its parts.
      const std::string concat = v.name + "/ConcatPartitions/concat";
      tensorflow::NodeDef* node = AddNode(&graph, concat, "ConcatV2", model.worker_device, v.shape);
      for (const GraphVariable& part : v.partitions) node->add_input(part.name);
      SetType(node, "T", tensorflow::DT_FLOAT);
      (*node->mutable_attr())["N"].set_i(static_cast<int64_t>(v.partitions.size()));
      variables.push_back(concat);
    }
    // By default the layer's inputs, then its variables (or those first).
    std::vector<std::string> defaults = inputs;
    defaults.insert(layer.op.variables_first ? defaults.begin() : defaults.end(), variables.begin(),
                    variables.end());
    if (layer.op.reads_labels) defaults.push_back(kLabels);
    node_of[layer.name] = AddChain(&graph, layer, inputs, variables, defaults, model.worker_device);
  }
  return graph;
}

}  // namespace pstrain
