#include "worker/network/cuda/conv_graph.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <vector>

#include "worker/network/cuda/check.h"
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/cuda/kernels.h"

namespace pstrain {
namespace worker {
namespace cuda {
namespace {

// The longest one direction's timing goes on once an engine has run: each candidate may
// compile a kernel first (tens of milliseconds to seconds).
constexpr std::chrono::seconds kTuneBudget(1);
constexpr int64_t kAlignment = 16;
constexpr int64_t kX = 'x', kW = 'w', kY = 'y';  // the tensors' unique ids

// Owns one backend descriptor.
class Descriptor {
 public:
  explicit Descriptor(cudnnBackendDescriptorType_t type) {
    status_ = cudnnBackendCreateDescriptor(type, &d_);
  }
  ~Descriptor() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }
  cudnnBackendDescriptor_t* ptr() { return &d_; }
  cudnnBackendDescriptor_t release() {
    cudnnBackendDescriptor_t d = d_;
    d_ = nullptr;
    return d;
  }
  // The first failure of creating, setting or finalizing, kept so that a chain of calls is
  // checked once.
  Descriptor& Set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
                  const void* value) {
    if (status_ == CUDNN_STATUS_SUCCESS)
      status_ = cudnnBackendSetAttribute(d_, name, type, count, value);
    return *this;
  }
  cudnnStatus_t Finalize() {
    if (status_ == CUDNN_STATUS_SUCCESS) status_ = cudnnBackendFinalize(d_);
    return status_;
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
  cudnnStatus_t status_ = CUDNN_STATUS_SUCCESS;
};

Status Failed(const std::string& what, cudnnStatus_t s) {
  return FailedPrecondition(what + ": " + cudnnGetErrorString(s));
}

// A packed NCHW float tensor of `dims` with unique id `uid`.
Status MakeTensor(const int64_t (&dims)[4], int64_t uid, Descriptor* t) {
  const int64_t strides[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  cudnnStatus_t s = t->Set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32)
                        .Set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims)
                        .Set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides)
                        .Set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid)
                        .Set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &kAlignment)
                        .Finalize();
  return s == CUDNN_STATUS_SUCCESS ? Status::OK() : Failed("tensor descriptor", s);
}

int64_t Elements(const int64_t (&dims)[4]) { return dims[0] * dims[1] * dims[2] * dims[3]; }

// The engine config's numerical notes forbid it under `o`: TF32 or down-converted inputs
// without allow_tf32, reduced-precision sums always, nondeterminism when determinism is asked.
bool Forbidden(cudnnBackendDescriptor_t config, const GpuOptions& o) {
  Descriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  int64_t got = 0;
  if (cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                               1, &got, engine.ptr()) != CUDNN_STATUS_SUCCESS) {
    return true;
  }
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int64_t count = 0;
  if (cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                               CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count,
                               notes) != CUDNN_STATUS_SUCCESS) {
    return true;
  }
  for (int64_t i = 0; i < count; ++i) {
    switch (notes[i]) {
      case CUDNN_NUMERICAL_NOTE_TENSOR_CORE:
      case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS:
        if (!o.allow_tf32) return true;
        break;
      case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION:
        return true;
      case CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC:
        if (o.cudnn_deterministic) return true;
        break;
      default:
        break;
    }
  }
  return false;
}

// A finalized variant pack of x, w and y with `workspace`.
cudnnStatus_t MakePack(const void* x, const void* w, const void* y, void* workspace,
                       Descriptor* pack) {
  void* pointers[3] = {const_cast<void*>(x), const_cast<void*>(w), const_cast<void*>(y)};
  const int64_t uids[3] = {kX, kW, kY};
  return pack->Set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, pointers)
      .Set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids)
      .Set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace)
      .Finalize();
}

// `plan` over x, w and y with `workspace`, through a pack made for this call.
cudnnStatus_t Execute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan, const void* x,
                      const void* w, const void* y, void* workspace) {
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  const cudnnStatus_t s = MakePack(x, w, y, workspace, &pack);
  if (s != CUDNN_STATUS_SUCCESS) return s;
  return cudnnBackendExecute(handle, plan, pack.get());
}

// Appends the engine configs that the first of `modes` the graph supports ranks for it.
cudnnStatus_t AppendConfigs(cudnnBackendDescriptor_t graph,
                            std::initializer_list<cudnnBackendHeurMode_t> modes,
                            std::vector<std::unique_ptr<Descriptor>>* configs) {
  const auto desc = CUDNN_TYPE_BACKEND_DESCRIPTOR;
  cudnnStatus_t st = CUDNN_STATUS_NOT_SUPPORTED;
  std::unique_ptr<Descriptor> heuristics;
  for (cudnnBackendHeurMode_t mode : modes) {
    heuristics = std::make_unique<Descriptor>(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    st = heuristics->Set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, desc, 1, &graph)
             .Set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode)
             .Finalize();
    if (st == CUDNN_STATUS_SUCCESS) break;
  }
  if (st != CUDNN_STATUS_SUCCESS) return st;
  int64_t available = 0;
  st = cudnnBackendGetAttribute(heuristics->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, desc, 0,
                                &available, nullptr);
  if (st != CUDNN_STATUS_SUCCESS || available <= 0) return st;
  std::vector<std::unique_ptr<Descriptor>> made;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < available; ++i) {
    made.push_back(std::make_unique<Descriptor>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(made.back()->get());
  }
  int64_t returned = 0;
  st = cudnnBackendGetAttribute(heuristics->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, desc, available,
                                &returned, raw.data());
  if (st != CUDNN_STATUS_SUCCESS) return st;
  for (int64_t i = 0; i < returned && i < available; ++i) configs->push_back(std::move(made[i]));
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace

Result<std::shared_ptr<const ConvGraphPlan>> ConvGraphPlan::Create(GpuContext* gpu,
                                                                   const ConvDescriptors& d,
                                                                   ConvDirection direction,
                                                                   const std::string& who) {
  const auto began = std::chrono::steady_clock::now();
  // The shapes and the convolution as the legacy descriptors hold them.
  cudnnDataType_t type;
  int n, c, h, w, ns, cs, hs, ws;
  PSTRAIN_CUDNN_CHECK(cudnnGetTensor4dDescriptor(d.x, &type, &n, &c, &h, &w, &ns, &cs, &hs, &ws));
  const int64_t x_dims[4] = {n, c, h, w};
  PSTRAIN_CUDNN_CHECK(cudnnGetTensor4dDescriptor(d.y, &type, &n, &c, &h, &w, &ns, &cs, &hs, &ws));
  const int64_t y_dims[4] = {n, c, h, w};
  cudnnTensorFormat_t format;
  int k, fc, r, s;
  PSTRAIN_CUDNN_CHECK(cudnnGetFilter4dDescriptor(d.w, &type, &format, &k, &fc, &r, &s));
  const int64_t w_dims[4] = {k, fc, r, s};
  int pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
  cudnnConvolutionMode_t mode;
  cudnnDataType_t compute;
  PSTRAIN_CUDNN_CHECK(cudnnGetConvolution2dDescriptor(d.conv, &pad_h, &pad_w, &stride_h, &stride_w,
                                                      &dil_h, &dil_w, &mode, &compute));

  Descriptor x(CUDNN_BACKEND_TENSOR_DESCRIPTOR), wt(CUDNN_BACKEND_TENSOR_DESCRIPTOR),
      y(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  RETURN_IF_ERROR(MakeTensor(x_dims, kX, &x));
  RETURN_IF_ERROR(MakeTensor(w_dims, kW, &wt));
  RETURN_IF_ERROR(MakeTensor(y_dims, kY, &y));

  Descriptor conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const int64_t spatial = 2, pads[2] = {pad_h, pad_w}, strides[2] = {stride_h, stride_w},
                dilations[2] = {dil_h, dil_w};
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  cudnnStatus_t st =
      conv.Set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial)
          .Set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32)
          .Set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode)
          .Set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pads)
          .Set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pads)
          .Set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilations)
          .Set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, strides)
          .Finalize();
  if (st != CUDNN_STATUS_SUCCESS) return Failed("convolution descriptor", st);

  const float alpha = 1.0f, beta = 0.0f;
  const auto desc = CUDNN_TYPE_BACKEND_DESCRIPTOR;
  cudnnBackendDescriptor_t xd = x.get(), wd = wt.get(), yd = y.get(), cd = conv.get();
  std::unique_ptr<Descriptor> op;
  switch (direction) {
    case ConvDirection::kForward:
      op = std::make_unique<Descriptor>(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
      op->Set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, desc, 1, &xd)
          .Set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, desc, 1, &wd)
          .Set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, desc, 1, &yd)
          .Set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, desc, 1, &cd)
          .Set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha)
          .Set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
      break;
    case ConvDirection::kBackwardData:
      op = std::make_unique<Descriptor>(
          CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR);
      op->Set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, desc, 1, &xd)
          .Set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, desc, 1, &wd)
          .Set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, desc, 1, &yd)
          .Set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, desc, 1, &cd)
          .Set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha)
          .Set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
      break;
    case ConvDirection::kBackwardFilter:
      op = std::make_unique<Descriptor>(
          CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR);
      op->Set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, desc, 1, &xd)
          .Set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, desc, 1, &wd)
          .Set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, desc, 1, &yd)
          .Set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, desc, 1, &cd)
          .Set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha)
          .Set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
      break;
  }
  st = op->Finalize();
  if (st != CUDNN_STATUS_SUCCESS) return Failed("convolution operation", st);

  cudnnHandle_t handle = gpu->cudnn();
  cudnnBackendDescriptor_t opd = op->get();
  Descriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  st = graph.Set(CUDNN_ATTR_OPERATIONGRAPH_OPS, desc, 1, &opd)
           .Set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
           .Finalize();
  if (st != CUDNN_STATUS_SUCCESS) return Failed("operation graph", st);

  // The heuristics' ranked engine configs (mode A where the operation has it, else the instant
  // heuristics), then cuDNN's fallback list: the engines that run the shape but that the
  // heuristics do not rank (PyTorch's benchmark times both).
  cudnnBackendDescriptor_t gd = graph.get();
  std::vector<std::unique_ptr<Descriptor>> configs;
  st = AppendConfigs(gd, {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_INSTANT}, &configs);
  if (st != CUDNN_STATUS_SUCCESS) return Failed("engine heuristics", st);
  const size_t ranked = configs.size();
  AppendConfigs(gd, {CUDNN_HEUR_MODE_FALLBACK}, &configs);  // none is no error
  const int64_t returned = static_cast<int64_t>(configs.size());
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const auto& c : configs) raw.push_back(c->get());

  // Scratch buffers to time on, filled with noise: some kernels run faster on zeros.
  const size_t limit = gpu->options().cudnn_workspace_limit;
  ASSIGN_OR_RETURN(DeviceBuffer xb, gpu->Allocate(Elements(x_dims) * sizeof(float)));
  ASSIGN_OR_RETURN(DeviceBuffer wb, gpu->Allocate(Elements(w_dims) * sizeof(float)));
  ASSIGN_OR_RETURN(DeviceBuffer yb, gpu->Allocate(Elements(y_dims) * sizeof(float)));
  cudaStream_t stream = gpu->stream();
  FillNoise(xb.as<float>(), Elements(x_dims), 1, stream);
  FillNoise(wb.as<float>(), Elements(w_dims), 2, stream);
  FillNoise(yb.as<float>(), Elements(y_dims), 3, stream);
  cudaEvent_t start, stop;
  PSTRAIN_CUDA_CHECK(cudaEventCreate(&start));
  PSTRAIN_CUDA_CHECK(cudaEventCreate(&stop));

  std::shared_ptr<ConvGraphPlan> best;
  float best_ms = std::numeric_limits<float>::infinity();
  int tried = 0;
  const int most = gpu->options().cudnn_graph_candidates;
  for (int64_t i = 0; i < returned && tried < most; ++i) {
    // Past the budget, only the heuristics' first usable config is still timed.
    if (best && std::chrono::steady_clock::now() - began > kTuneBudget) break;
    if (Forbidden(raw[i], gpu->options())) continue;
    Descriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    cudnnBackendDescriptor_t cfg = raw[i];
    if (plan.Set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, desc, 1, &cfg)
            .Set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
            .Finalize() != CUDNN_STATUS_SUCCESS) {
      continue;  // this engine cannot run this shape here
    }
    int64_t workspace = 0, one = 0;
    if (cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                 CUDNN_TYPE_INT64, 1, &one, &workspace) != CUDNN_STATUS_SUCCESS ||
        workspace < 0 || static_cast<size_t>(workspace) > limit) {
      continue;
    }
    Result<DeviceBuffer> scratch = gpu->Allocate(std::max<size_t>(workspace, 1));
    if (!scratch.ok()) continue;
    ++tried;
    // One untimed run, then the best of three.
    if (Execute(handle, plan.get(), xb.data(), wb.data(), yb.data(), scratch->data()) !=
        CUDNN_STATUS_SUCCESS) {
      continue;
    }
    float fastest = std::numeric_limits<float>::infinity();
    for (int rep = 0; rep < 3; ++rep) {
      PSTRAIN_CUDA_CHECK(cudaEventRecord(start, stream));
      Execute(handle, plan.get(), xb.data(), wb.data(), yb.data(), scratch->data());
      PSTRAIN_CUDA_CHECK(cudaEventRecord(stop, stream));
      PSTRAIN_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      PSTRAIN_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      fastest = std::min(fastest, ms);
    }
    if (fastest < best_ms) {
      best_ms = fastest;
      best.reset(new ConvGraphPlan());
      best->plan_ = plan.release();
      best->workspace_bytes_ = static_cast<size_t>(workspace);
      best->ms_ = fastest;
      std::ostringstream text;
      text << "engine config " << i << " of " << returned
           << (static_cast<size_t>(i) < ranked ? " (ranked), " : " (fallback), ") << fastest
           << " ms";
      best->description_ = text.str();
    }
  }
  PSTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream));  // the scratch goes back after the timing
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  if (best)
    best->description_ +=
        " (" + std::to_string(tried) + " timed in " + std::to_string(seconds) + " s)";
  if (!best) {
    return FailedPrecondition(who + ": none of cuDNN's " + std::to_string(returned) +
                              " engine configs runs this convolution as the options allow");
  }
  return std::shared_ptr<const ConvGraphPlan>(std::move(best));
}

ConvGraphPlan::~ConvGraphPlan() {
  for (auto& [pointers, pack] : packs_) cudnnBackendDestroyDescriptor(pack);
  if (plan_) cudnnBackendDestroyDescriptor(plan_);
}

bool ConvGraphPlan::Run(cudnnHandle_t handle, const void* x, const void* w, const void* y,
                        void* workspace) const {
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % kAlignment == 0; };
  if (!aligned(x) || !aligned(w) || !aligned(y)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  const std::array<const void*, 4> key = {x, w, y, workspace};
  auto it = packs_.find(key);
  if (it == packs_.end()) {
    if (packs_.size() >= 256) {  // buffers that moved (another batch size): start over
      for (auto& [pointers, pack] : packs_) cudnnBackendDestroyDescriptor(pack);
      packs_.clear();
    }
    Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    PSTRAIN_CUDNN_CHECK(MakePack(x, w, y, workspace, &pack));
    it = packs_.emplace(key, pack.release()).first;
  }
  PSTRAIN_CUDNN_CHECK(cudnnBackendExecute(handle, plan_, it->second));
  return true;
}

}  // namespace cuda
}  // namespace worker
}  // namespace pstrain
