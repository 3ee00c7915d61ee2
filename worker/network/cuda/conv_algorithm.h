// Choosing cuDNN's convolution algorithms, for every layer that convolves (conv2d, whose
// forward, backward-data and backward-filter passes these are, and conv2d_transpose, which runs
// the same three in another order). As TensorFlow (TF_CUDNN_USE_AUTOTUNE,
// TF_DETERMINISTIC_OPS) and PyTorch (cudnn.benchmark, cudnn.deterministic): by default each
// shape's three algorithms are timed once on the GPU (cudnnFind*Ex, on scratch buffers from the
// context's allocator) and the fastest kept; --cudnn_autotune=false takes cuDNN's heuristic
// ranking instead, and --cudnn_deterministic=true keeps only algorithms that repeat bit for bit.
// Every choice computes in plain FP32 (the descriptors forbid TF32).
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <memory>
#include <string>

namespace pstrain {
namespace worker {
namespace cuda {

class GpuContext;

// One convolution as cuDNN sees it: x convolved with w gives y.
struct ConvDescriptors {
  cudnnTensorDescriptor_t x;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  cudnnTensorDescriptor_t y;
};

class ConvGraphPlan;

struct ConvAlgorithms {
  cudnnConvolutionFwdAlgo_t forward;
  cudnnConvolutionBwdDataAlgo_t backward_data;
  cudnnConvolutionBwdFilterAlgo_t backward_filter;
  // With GpuOptions::cudnn_graph: each direction's engine through cuDNN's graph API
  // (conv_graph.h), null where none could be made (the legacy algorithm above runs then).
  std::shared_ptr<const ConvGraphPlan> forward_graph, backward_data_graph, backward_filter_graph;
  // The legacy algorithms' timed runs (infinity when chosen by heuristics), which a graph
  // engine must beat.
  float forward_ms = 1e30f, backward_data_ms = 1e30f, backward_filter_ms = 1e30f;
  size_t workspace_bytes = 0;  // the most any of the three needs
};

// The three algorithms for `d` under the context's policy (GpuOptions::cudnn_autotune and
// cudnn_deterministic). Autotuned choices are remembered per shape for the process.
ConvAlgorithms ChooseConvAlgorithms(GpuContext* gpu, const ConvDescriptors& d,
                                    const std::string& who);

}  // namespace cuda
}  // namespace worker
}  // namespace pstrain
