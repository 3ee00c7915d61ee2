// A model's graph as a TensorFlow GraphDef, for TensorBoard's Graphs tab: what TF users get from
// tf.summary.FileWriter(logdir, sess.graph). TensorBoard draws a "/" in a node's name as a name
// scope, so each layer becomes a group holding its operation and its variables, as a Keras layer's
// scope does ("conv1/Conv2D", "conv1/weights"); placement is written as TensorFlow writes it
// ("/job:ps/task:1"), so "Color by device" shows which server holds what.
//
// This file knows only TensorFlow's format, no layer type: each layer brings its own op and
// attributes (GraphOp, common/graph_op.h); model_graph.h fills a GraphModel from a model config,
// the layers themselves and the servers' placement.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/graph_op.h"
#include "common/summary/proto/graph.pb.h"

namespace pstrain {

// One VariableV2 node: a variable, or one partition of a variable split across servers.
struct GraphVariable {
  std::string name;  // "conv1/weights", or "fc1/weights/part_0" for a partition
  std::vector<int64_t> shape;
  std::string device;  // "/job:ps/task:0"; "" when unplaced
};

struct GraphLayer {
  std::string name;  // the name scope: "conv1"
  std::string type;  // pstrain's layer type: "conv2d"
  // Layer names, or the names of the model's inputs.
  std::vector<std::string> inputs;
  std::vector<int64_t> output_shape;  // per example, without the batch dimension
  // In the layer's creation order. A variable split across servers has several partitions.
  struct Variable {
    std::string name;  // "fc1/weights"
    std::vector<int64_t> shape;
    std::vector<GraphVariable> partitions;  // one (named as the variable) when not split
  };
  std::vector<Variable> variables;
  // The TensorFlow op the layer computes (with its bias, activation or statistics folded in);
  // an empty op is written as the layer type.
  GraphOp op;
};

// One input of the model, a Placeholder: "input" [C, H, W] of a model of images, or each named
// input of a click model (dense floats, int64 id lists).
struct GraphInput {
  std::string name;
  std::vector<int64_t> shape;  // per example
  GraphDataType type = GraphDataType::kFloat;
};

struct GraphModel {
  std::vector<GraphInput> inputs;
  std::vector<GraphLayer> layers;
  // Where the layers run: "/job:worker/task:0", "/job:worker/task:0/device:GPU:0".
  std::string worker_device;
};

// The node name of a layer's operation: "<layer>/<op>" ("conv1/Conv2D").
std::string LayerNodeName(const GraphLayer& layer);

// Nodes, in order: a placeholder per model input and the "labels" (int32) placeholder; then per
// layer its variables (VariableV2 with dtype and shape; a split variable's partitions and the
// ConcatV2 that joins them on the worker, as TF's partitioned variables read), then its
// operations, whose inputs are the producing layers' operations and its variables (a loss layer
// also reads "labels") or what the op lists (GraphOp::reads; a constant is a Const node in the
// layer's scope), with "T" float (unless the op has none) and the op's own attributes. Every node
// carries "_output_shapes" as TensorFlow writes them, the batch dimension -1.
tensorflow::GraphDef BuildGraphDef(const GraphModel& model);

}  // namespace pstrain
