#include "tools/device_flags.h"

#include <gflags/gflags.h>

DEFINE_string(device, "auto",
              "where to compute: auto (the first GPU CUDA_VISIBLE_DEVICES leaves visible, else "
              "the CPU), cpu or gpu");
DEFINE_bool(log_device_placement, false,
            "log the GPUs found (name, memory, compute capability) and the device of every layer");
DEFINE_bool(allow_soft_placement, true,
            "with no GPU visible, compute on the CPU with a warning; false: stop with an error");
DEFINE_bool(gpu_allow_growth, true,
            "take GPU memory as needed (regions doubling) instead of the whole "
            "--gpu_memory_fraction at start");
DEFINE_double(gpu_memory_fraction, 1.0,
              "the most of the GPU's memory this process may take, in (0, 1]");

DEFINE_bool(cudnn_autotune, true,
            "time cuDNN's convolution algorithms once per shape and keep the fastest (as "
            "TF_CUDNN_USE_AUTOTUNE, torch.backends.cudnn.benchmark); false: cuDNN's heuristics");
DEFINE_bool(cudnn_deterministic, false,
            "only convolution algorithms whose results repeat bit for bit (as "
            "TF_DETERMINISTIC_OPS, torch.backends.cudnn.deterministic); slower on some shapes");

DEFINE_bool(allow_tf32, false,
            "on the GPU, convolutions and matrix products in TF32 on the tensor cores (as "
            "TensorFlow's enable_tensor_float_32_execution and PyTorch's allow_tf32): faster, "
            "with about 10 mantissa bits in the products; false: plain FP32");

DEFINE_int64(cudnn_workspace_limit_mb, 512,
             "the most GPU scratch memory one convolution algorithm may use, in MiB (as "
             "TF_CUDNN_WORKSPACE_LIMIT_IN_MB, whose default is 4096); at least 1");

DEFINE_bool(cudnn_graph, true,
            "with --cudnn_autotune, also time the engines cuDNN's graph API offers for each "
            "convolution (as PyTorch's cudnn.benchmark) and run the fastest; false: the legacy "
            "API's algorithms only");

DEFINE_int32(cudnn_graph_candidates, 8,
             "with --cudnn_graph, how many of the graph API's engine configs are timed per "
             "convolution direction: cuDNN's heuristics' ranked list, then its fallback list "
             "(as PyTorch's cudnn.benchmark_limit); 1 to 256");

DEFINE_double(cudnn_graph_margin, 0.1,
              "with --cudnn_graph, how much faster than the legacy algorithm's timed run a graph "
              "engine must be to run instead (0.1: 10%); in [0, 1)");

namespace pstrain {
namespace worker {

DeviceOptions DeviceOptionsFromFlags() {
  DeviceOptions o;
  o.device = FLAGS_device;
  o.log_device_placement = FLAGS_log_device_placement;
  o.allow_soft_placement = FLAGS_allow_soft_placement;
  o.gpu_allow_growth = FLAGS_gpu_allow_growth;
  o.gpu_memory_fraction = FLAGS_gpu_memory_fraction;
  o.cudnn_autotune = FLAGS_cudnn_autotune;
  o.cudnn_deterministic = FLAGS_cudnn_deterministic;
  o.allow_tf32 = FLAGS_allow_tf32;
  o.cudnn_workspace_limit_mb = FLAGS_cudnn_workspace_limit_mb;
  o.cudnn_graph = FLAGS_cudnn_graph;
  o.cudnn_graph_candidates = FLAGS_cudnn_graph_candidates;
  o.cudnn_graph_margin = FLAGS_cudnn_graph_margin;
  return o;
}

}  // namespace worker
}  // namespace pstrain
