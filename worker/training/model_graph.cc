#include "worker/training/model_graph.h"

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "common/replication/sharding.h"
#include "worker/network/layer.h"
#include "worker/network/model.h"

namespace pstrain {
namespace {

// The model's inputs as Model::FromConfig reads them: `input: [C, H, W]`, or `inputs:` a list
// of {name, shape}; all float until a layer reads one as ids.
Result<std::vector<GraphInput>> ModelInputs(const ConfigNode& model_node) {
  if (!model_node.Has("inputs")) {
    ASSIGN_OR_RETURN(std::vector<int64_t> shape, model_node.GetIntList("input"));
    return std::vector<GraphInput>{{"input", shape, GraphDataType::kFloat}};
  }
  ASSIGN_OR_RETURN(ConfigNode list, model_node.Child("inputs"));
  if (!list.IsSequence() || list.size() == 0) {
    return list.Error("must be a non-empty list of {name, shape}");
  }
  std::vector<GraphInput> inputs;
  for (size_t k = 0; k < list.size(); ++k) {
    GraphInput in;
    ASSIGN_OR_RETURN(in.name, list.At(k).GetString("name"));
    ASSIGN_OR_RETURN(in.shape, list.At(k).GetIntList("shape"));
    inputs.push_back(std::move(in));
  }
  return inputs;
}

// Marks as int64 the inputs that a layer reads as ids (GraphOp::reads_ids); an input read both
// as ids and as floats is an error naming the layer.
Status TypeIdInputs(GraphModel* graph) {
  std::map<std::string, std::string> float_reader, id_reader;  // input -> a layer reading it
  for (const GraphLayer& layer : graph->layers) {
    for (size_t k = 0; k < layer.inputs.size(); ++k) {
      auto& readers = k == 0 && layer.op.reads_ids ? id_reader : float_reader;
      readers.emplace(layer.inputs[k], layer.name);
    }
  }
  for (GraphInput& in : graph->inputs) {
    if (!id_reader.count(in.name)) continue;
    if (float_reader.count(in.name)) {
      return InvalidArgument("model input '" + in.name + "' is read as ids by layer '" +
                             id_reader[in.name] + "' and as floats by layer '" +
                             float_reader[in.name] + "'");
    }
    in.type = GraphDataType::kInt64;
  }
  return Status::OK();
}

}  // namespace

std::string PsDevice(int task) { return "/job:ps/task:" + std::to_string(task); }

Result<GraphModel> DescribeModel(const ConfigNode& model_node, const ModelGraphOptions& options) {
  GraphModel graph;
  graph.worker_device = options.worker_device;
  ASSIGN_OR_RETURN(graph.inputs, ModelInputs(model_node));
  ASSIGN_OR_RETURN(ConfigNode layers, model_node.Child("layers"));
  if (!layers.IsSequence()) return layers.Error("must be a list of layers");

  std::map<std::string, Shape> shapes;
  for (const GraphInput& in : graph.inputs) shapes[in.name] = Shape(in.shape);
  std::vector<replication::VariableSpec> specs;  // in model order, as the PS client lists them
  for (size_t i = 0; i < layers.size(); ++i) {
    const ConfigNode spec = layers.At(i);
    GraphLayer layer;
    ASSIGN_OR_RETURN(layer.name, spec.GetString("name"));
    ASSIGN_OR_RETURN(layer.type, spec.GetString("type"));
    // The layer itself decides its shapes and variables; it lives only for this iteration.
    auto created = worker::LayerRegistry::Global().Create(layer.type, layer.name);
    if (!created.ok()) return created.status().WithContext(spec.Where());
    std::unique_ptr<worker::Layer> l = std::move(created).value();
    RETURN_IF_ERROR(l->Configure(spec).WithContext(l->Describe()));
    ASSIGN_OR_RETURN(layer.inputs,
                     worker::LayerInputNames(spec, i == 0 ? graph.inputs[0].name : graph.layers.back().name));
    std::vector<Shape> in_shapes;
    for (const std::string& in : layer.inputs) {
      auto it = shapes.find(in);
      if (it == shapes.end()) {
        return spec.Error(l->Describe() + ": input '" + in + "' is not a layer defined before it");
      }
      in_shapes.push_back(it->second);
    }
    if (static_cast<int>(in_shapes.size()) != l->num_inputs()) {
      return spec.Error(l->Describe() + " takes " + std::to_string(l->num_inputs()) +
                        " input(s), got " + std::to_string(in_shapes.size()));
    }
    auto out = l->Setup(in_shapes);
    if (!out.ok()) return out.status().WithContext(spec.Where());
    layer.output_shape = out->dims();
    // The layer's own TensorFlow op; one without is drawn under its type name (and fails
    // LayerCasesTest).
    auto op = l->TensorFlowOp();
    if (op.ok()) layer.op = std::move(op).value();
    shapes[layer.name] = *out;
    for (const worker::Variable& v : l->variables()) {
      layer.variables.push_back({v.name, v.value.shape().dims(), {}});
      specs.push_back({v.name, v.value.shape()});
    }
    graph.layers.push_back(std::move(layer));
  }
  RETURN_IF_ERROR(TypeIdInputs(&graph));

  std::map<std::string, std::vector<GraphVariable>> parts;  // variable -> its partitions
  if (options.num_ps > 0) {
    ASSIGN_OR_RETURN(
        replication::Sharding sharding,
        replication::Sharding::Compute(specs, options.num_ps, options.partition_bytes));
    for (const replication::Partition& p : sharding.partitions()) {
      parts[p.variable].push_back({p.key, p.shape.dims(), PsDevice(p.task)});
    }
  }
  for (GraphLayer& layer : graph.layers) {
    for (GraphLayer::Variable& v : layer.variables) {
      auto it = parts.find(v.name);
      v.partitions = it != parts.end()
                         ? it->second
                         : std::vector<GraphVariable>{{v.name, v.shape, options.worker_device}};
    }
  }
  return graph;
}

Result<tensorflow::GraphDef> ModelGraphDef(const ConfigNode& model_node,
                                           const ModelGraphOptions& options) {
  ASSIGN_OR_RETURN(GraphModel graph, DescribeModel(model_node, options));
  return BuildGraphDef(graph);
}

}  // namespace pstrain
