#include "worker/network/cuda/conv_algorithm.h"

#include <glog/logging.h>

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <sstream>

#include "worker/memory/growth_allocator.h"
#include "worker/network/cuda/check.h"
#include "worker/network/cuda/conv_graph.h"
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/cuda/kernels.h"

namespace pstrain {
namespace worker {
namespace cuda {
namespace {

constexpr int kMaxResults = 16;

// The first usable result: cuDNN ranks them (by measured time when autotuning, by its
// heuristics otherwise); usable means it ran, fits `workspace`, computes in FP32 FMA (or, with
// allow_tf32, in TF32 on the tensor cores: cuDNN's default math) and, when asked, is
// deterministic. Else algorithm 0, which every shape supports. `ms` (if given) receives the
// chosen one's measured time (infinity for algorithm 0).
template <typename Perf>
decltype(Perf::algo) FirstUsable(const Perf* perf, int count, size_t workspace, const GpuOptions& o,
                                 const std::string& what, float* ms = nullptr) {
  const bool deterministic = o.cudnn_deterministic;
  for (int i = 0; i < count; ++i) {
    const Perf& p = perf[i];
    const bool math_ok =
        p.mathType == CUDNN_FMA_MATH || (o.allow_tf32 && p.mathType == CUDNN_DEFAULT_MATH);
    if (p.status == CUDNN_STATUS_SUCCESS && p.memory <= workspace && math_ok &&
        (!deterministic || p.determinism == CUDNN_DETERMINISTIC)) {
      if (ms) *ms = p.time;
      return p.algo;
    }
  }
  LOG(WARNING) << "cuDNN offers no " << (o.allow_tf32 ? "FP32 or TF32 " : "FP32 ") << what
               << " algorithm within " << FormatBytes(workspace) << " of workspace"
               << (deterministic ? " that is deterministic" : "") << "; using algorithm 0";
  return static_cast<decltype(Perf::algo)>(0);
}

ConvAlgorithms ByHeuristics(cudnnHandle_t h, const ConvDescriptors& d, const GpuOptions& o) {
  ConvAlgorithms a;
  int count = 0;
  cudnnConvolutionFwdAlgoPerf_t fwd[kMaxResults];
  PSTRAIN_CUDNN_CHECK(
      cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, kMaxResults, &count, fwd));
  a.forward = FirstUsable(fwd, count, o.cudnn_workspace_limit, o, "forward");
  cudnnConvolutionBwdDataAlgoPerf_t data[kMaxResults];
  PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x,
                                                                  kMaxResults, &count, data));
  a.backward_data = FirstUsable(data, count, o.cudnn_workspace_limit, o, "backward data");
  cudnnConvolutionBwdFilterAlgoPerf_t filter[kMaxResults];
  PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w,
                                                                    kMaxResults, &count, filter));
  a.backward_filter = FirstUsable(filter, count, o.cudnn_workspace_limit, o, "backward filter");
  return a;
}

size_t TensorBytes(cudnnTensorDescriptor_t t) {
  size_t bytes = 0;
  PSTRAIN_CUDNN_CHECK(cudnnGetTensorSizeInBytes(t, &bytes));
  return bytes;
}

// Times every algorithm on scratch buffers filled with noise (some kernels run faster on
// zeros) with as much workspace as the allocator gives, up to the options' limit.
Result<ConvAlgorithms> ByTiming(GpuContext* gpu, const ConvDescriptors& d, const GpuOptions& o) {
  cudnnDataType_t type;
  cudnnTensorFormat_t format;
  int k = 0, c = 0, r = 0, s = 0;
  PSTRAIN_CUDNN_CHECK(cudnnGetFilter4dDescriptor(d.w, &type, &format, &k, &c, &r, &s));
  const size_t x_bytes = TensorBytes(d.x), y_bytes = TensorBytes(d.y);
  const size_t w_bytes = sizeof(float) * k * c * r * s;
  // The workspace first, so that it takes a region of its own when it grows one, which
  // ChooseConvAlgorithms gives back once the buffers are freed.
  DeviceBuffer workspace;
  for (size_t want = o.cudnn_workspace_limit; want >= (size_t{1} << 20); want /= 4) {
    Result<DeviceBuffer> got = gpu->Allocate(want);
    if (got.ok()) {
      workspace = std::move(got).value();
      break;
    }
  }
  ASSIGN_OR_RETURN(DeviceBuffer x, gpu->Allocate(x_bytes));
  ASSIGN_OR_RETURN(DeviceBuffer y, gpu->Allocate(y_bytes));
  ASSIGN_OR_RETURN(DeviceBuffer w, gpu->Allocate(w_bytes));
  cudaStream_t stream = gpu->stream();
  FillNoise(x.as<float>(), x_bytes / sizeof(float), 1, stream);
  FillNoise(y.as<float>(), y_bytes / sizeof(float), 3, stream);
  FillNoise(w.as<float>(), w_bytes / sizeof(float), 2, stream);
  cudnnHandle_t h = gpu->cudnn();
  ConvAlgorithms a;
  int count = 0;
  const size_t ws = workspace.bytes();
  cudnnConvolutionFwdAlgoPerf_t fwd[kMaxResults];
  PSTRAIN_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, d.x, x.data(), d.w, w.data(),
                                                             d.conv, d.y, y.data(), kMaxResults,
                                                             &count, fwd, workspace.data(), ws));
  a.forward = FirstUsable(fwd, count, ws, o, "forward", &a.forward_ms);
  cudnnConvolutionBwdDataAlgoPerf_t data[kMaxResults];
  PSTRAIN_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
      h, d.w, w.data(), d.y, y.data(), d.conv, d.x, x.data(), kMaxResults, &count, data,
      workspace.data(), ws));
  a.backward_data = FirstUsable(data, count, ws, o, "backward data", &a.backward_data_ms);
  cudnnConvolutionBwdFilterAlgoPerf_t filter[kMaxResults];
  PSTRAIN_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
      h, d.x, x.data(), d.y, y.data(), d.conv, d.w, w.data(), kMaxResults, &count, filter,
      workspace.data(), ws));
  a.backward_filter = FirstUsable(filter, count, ws, o, "backward filter", &a.backward_filter_ms);
  // The scratch goes back to the allocator once the timing kernels are done with it.
  gpu->Synchronize();
  return a;
}

// The shape, padding and strides that decide the algorithms: autotuned choices are shared by
// every layer of the same convolution (ResNet-50 has 53 convolutions of 23 kinds).
std::string ShapeKey(const ConvDescriptors& d, bool deterministic) {
  std::ostringstream key;
  auto tensor = [&](cudnnTensorDescriptor_t t) {
    cudnnDataType_t type;
    int n, c, h, w, ns, cs, hs, ws;
    PSTRAIN_CUDNN_CHECK(cudnnGetTensor4dDescriptor(t, &type, &n, &c, &h, &w, &ns, &cs, &hs, &ws));
    key << n << 'x' << c << 'x' << h << 'x' << w << ';';
  };
  tensor(d.x);
  tensor(d.y);
  cudnnDataType_t type;
  cudnnTensorFormat_t format;
  int k, c, r, s;
  PSTRAIN_CUDNN_CHECK(cudnnGetFilter4dDescriptor(d.w, &type, &format, &k, &c, &r, &s));
  int ph, pw, sh, sw, dh, dw;
  cudnnConvolutionMode_t mode;
  PSTRAIN_CUDNN_CHECK(
      cudnnGetConvolution2dDescriptor(d.conv, &ph, &pw, &sh, &sw, &dh, &dw, &mode, &type));
  key << k << 'x' << c << 'x' << r << 'x' << s << ";p" << ph << ',' << pw << ";s" << sh << ',' << sw
      << ";d" << dh << ',' << dw << (deterministic ? ";det" : "");
  return key.str();
}

size_t WorkspaceFor(cudnnHandle_t h, const ConvDescriptors& d, const ConvAlgorithms& a) {
  size_t ws = 0, bytes = 0;
  PSTRAIN_CUDNN_CHECK(
      cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, a.forward, &bytes));
  ws = std::max(ws, bytes);
  PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x,
                                                                   a.backward_data, &bytes));
  ws = std::max(ws, bytes);
  PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w,
                                                                     a.backward_filter, &bytes));
  return std::max(ws, bytes);
}

// Each direction's fastest engine through the graph API where it beats the legacy algorithm's
// timed run by more than the options' margin (a graph call costs the host more: an H200 ran
// ResNet-50 at 783 img/s with every direction on the graph against 839 on the legacy
// algorithms), remembered per shape as the legacy choices are; any other direction keeps its
// legacy algorithm.
void AddGraphPlans(GpuContext* gpu, const ConvDescriptors& d, const std::string& who,
                   ConvAlgorithms* a) {
  static std::mutex mu;
  using Plans = std::array<std::shared_ptr<const ConvGraphPlan>, 3>;
  static std::map<std::string, Plans>* made = new std::map<std::string, Plans>;
  const std::string key = ShapeKey(d, gpu->options().cudnn_deterministic);
  std::lock_guard<std::mutex> lock(mu);
  auto it = made->find(key);
  if (it == made->end()) {
    Plans plans;
    const ConvDirection directions[3] = {ConvDirection::kForward, ConvDirection::kBackwardData,
                                         ConvDirection::kBackwardFilter};
    const float legacy_ms[3] = {a->forward_ms, a->backward_data_ms, a->backward_filter_ms};
    for (int i = 0; i < 3; ++i) {
      auto plan = ConvGraphPlan::Create(gpu, d, directions[i], who);
      if (plan.ok()) {
        const double margin = gpu->options().cudnn_graph_margin;
        if ((*plan)->ms() < (1.0 - margin) * legacy_ms[i]) plans[i] = *plan;
        VLOG(1) << who << ": direction " << i << ": legacy " << legacy_ms[i] << " ms, graph "
                << (*plan)->description() << (plans[i] ? ": graph" : ": legacy");
      } else {
        LOG(WARNING) << who << ": the legacy cuDNN algorithm runs: " << plan.status().message();
      }
    }
    gpu->allocator()->ReleaseFreeRegions();  // the timing's scratch
    it = made->emplace(key, plans).first;
  }
  a->forward_graph = it->second[0];
  a->backward_data_graph = it->second[1];
  a->backward_filter_graph = it->second[2];
  for (const auto& plan : it->second) {
    if (plan) a->workspace_bytes = std::max(a->workspace_bytes, plan->workspace_bytes());
  }
}

}  // namespace

ConvAlgorithms ChooseConvAlgorithms(GpuContext* gpu, const ConvDescriptors& d,
                                    const std::string& who) {
  const GpuOptions& o = gpu->options();
  ConvAlgorithms a;
  if (!o.cudnn_autotune) {
    a = ByHeuristics(gpu->cudnn(), d, o);
  } else {
    static std::mutex mu;
    static std::map<std::string, ConvAlgorithms>* tuned = new std::map<std::string, ConvAlgorithms>;
    const std::string key = ShapeKey(d, o.cudnn_deterministic);
    std::lock_guard<std::mutex> lock(mu);
    auto it = tuned->find(key);
    if (it != tuned->end()) {
      a = it->second;
    } else {
      Result<ConvAlgorithms> timed = ByTiming(gpu, d, o);
      // The timing's workspace (up to the limit) is a transient: give back the region
      // it grew, so that the process holds what training uses, not that too.
      gpu->allocator()->ReleaseFreeRegions();
      if (timed.ok()) {
        a = *timed;
        tuned->emplace(key, a);
      } else {
        // Too little memory left to time them: the heuristics need none.
        LOG(WARNING) << who << ": cannot time cuDNN's algorithms (" << timed.status().message()
                     << "); taking cuDNN's heuristic choice";
        a = ByHeuristics(gpu->cudnn(), d, o);
      }
    }
  }
  a.workspace_bytes = WorkspaceFor(gpu->cudnn(), d, a);
  if (o.cudnn_autotune && o.cudnn_graph) AddGraphPlans(gpu, d, who, &a);
  VLOG(1) << who << ": cuDNN algorithms forward " << a.forward << ", backward data "
          << a.backward_data << ", backward filter " << a.backward_filter << ", workspace "
          << FormatBytes(a.workspace_bytes) << (o.cudnn_autotune ? " (timed)" : " (heuristics)");
  return a;
}

}  // namespace cuda
}  // namespace worker
}  // namespace pstrain
