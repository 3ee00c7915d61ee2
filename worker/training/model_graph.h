// The GraphDef of a model config as a cluster runs it (graph_def.h): each layer's output shape
// from the layer's own Setup and its op from the layer's own TensorFlowOp, each variable on the
// parameter-server task that replication::Sharding (the function the servers and the PS client use)
// gives it, split variables as their parts.
//
// It reads the worker's layers, so it lives here beside the trainer and not in common/summary
// (which keeps only TensorFlow's format, graph_def.h): arrows point from worker/ to common/, never
// back. Its own library (pstrain_model_graph), linked by whatever writes a graph.
#pragma once

#include <cstdint>
#include <string>

#include "common/config.h"
#include "common/status.h"
#include "common/summary/graph_def.h"

namespace pstrain {

struct ModelGraphOptions {
  // Parameter servers; 0 (one process) places the variables beside the layers.
  int num_ps = 0;
  // As the servers split variables (--partition_bytes).
  int64_t partition_bytes = int64_t{8} << 20;
  // Where the layers run, as TensorFlow writes it.
  std::string worker_device = "/job:worker/task:0";
};

// "/job:ps/task:<task>"
std::string PsDevice(int task);

// The layers, their wiring and shapes and the placed variables of `model_node` (a config's
// "model:"). Errors name the config path, as Model::FromConfig's do.
Result<GraphModel> DescribeModel(const ConfigNode& model_node, const ModelGraphOptions& options);
// BuildGraphDef(DescribeModel(...)).
Result<tensorflow::GraphDef> ModelGraphDef(const ConfigNode& model_node,
                                           const ModelGraphOptions& options);

}  // namespace pstrain
