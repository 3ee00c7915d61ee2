#include "worker/network/device_placement.h"

#include <omp.h>
#include <sched.h>

#include <cstdlib>

#include "worker/memory/growth_allocator.h"
#if PSTRAIN_HAVE_GPU_BACKEND
#include "worker/network/cuda/gpu_context.h"
#endif

namespace pstrain {
namespace worker {

Status ValidateDeviceOptions(const DeviceOptions& o) {
  if (o.device != "auto" && o.device != "cpu" && o.device != "gpu") {
    return InvalidArgument("--device must be auto, cpu or gpu, got '" + o.device + "'");
  }
  if (!(o.gpu_memory_fraction > 0.0 && o.gpu_memory_fraction <= 1.0)) {
    return InvalidArgument("--gpu_memory_fraction must be in (0, 1], got " +
                           std::to_string(o.gpu_memory_fraction));
  }
  // At most 1 TiB: the shift to bytes cannot overflow.
  if (o.cudnn_workspace_limit_mb < 1 || o.cudnn_workspace_limit_mb > (int64_t{1} << 20)) {
    return InvalidArgument("--cudnn_workspace_limit_mb must be in [1, 1048576] MiB, got " +
                           std::to_string(o.cudnn_workspace_limit_mb));
  }
  if (o.cudnn_graph_candidates < 1 || o.cudnn_graph_candidates > 256) {
    return InvalidArgument("--cudnn_graph_candidates must be in [1, 256], got " +
                           std::to_string(o.cudnn_graph_candidates));
  }
  if (!(o.cudnn_graph_margin >= 0.0 && o.cudnn_graph_margin < 1.0)) {
    return InvalidArgument("--cudnn_graph_margin must be in [0, 1), got " +
                           std::to_string(o.cudnn_graph_margin));
  }
  return Status::OK();
}

bool GpuBackendBuilt() {
#if PSTRAIN_HAVE_GPU_BACKEND
  return true;
#else
  return false;
#endif
}

std::string CudaVisibleDevicesText(const char* value) {
  return value ? "CUDA_VISIBLE_DEVICES=\"" + std::string(value) + "\""
               : "CUDA_VISIBLE_DEVICES unset";
}

Result<DeviceChoice> ChooseDevice(const DeviceOptions& o, const Result<int>& visible_gpus,
                                  bool gpu_backend_built, const char* cuda_visible_devices) {
  RETURN_IF_ERROR(ValidateDeviceOptions(o));
  DeviceChoice choice;
  if (o.device == "cpu") return choice;
  std::string why_not;
  if (!gpu_backend_built) {
    why_not = "this binary was built without the CUDA backend";
  } else if (!visible_gpus.ok()) {
    why_not = "no GPU is visible (" + CudaVisibleDevicesText(cuda_visible_devices) + ": " +
              visible_gpus.status().message() + ")";
  } else if (visible_gpus.value() == 0) {
    why_not = "no GPU is visible (" + CudaVisibleDevicesText(cuda_visible_devices) +
              ": cudaGetDeviceCount found 0 devices)";
  }
  if (why_not.empty()) {
    choice.device = Device::kGpu;
    return choice;
  }
  if (!o.allow_soft_placement) {
    return FailedPrecondition("--device=" + o.device + " wants a GPU but " + why_not +
                              ", and --allow_soft_placement=false forbids falling back to the "
                              "CPU; make a GPU visible through CUDA_VISIBLE_DEVICES, or pass "
                              "--device=cpu or --allow_soft_placement=true");
  }
  choice.warning = "--device=" + o.device + ": " + why_not +
                   "; computing on the CPU instead (--allow_soft_placement=true)";
  return choice;
}

Result<std::unique_ptr<ComputeDevice>> ComputeDevice::Open(const DeviceOptions& o,
                                                           const std::string& who) {
  RETURN_IF_ERROR(ValidateDeviceOptions(o));
  const char* mask = std::getenv("CUDA_VISIBLE_DEVICES");
  Result<int> visible = Unavailable("not probed");
#if PSTRAIN_HAVE_GPU_BACKEND
  std::vector<cuda::GpuDescription> gpus;
  if (o.device != "cpu") {
    auto listed = cuda::ListVisibleGpus();
    if (listed.ok()) {
      gpus = *listed;
      visible = static_cast<int>(gpus.size());
    } else {
      visible = listed.status();
    }
  }
  if (o.log_device_placement && o.device != "cpu") {
    LOG(INFO) << who << ": " << gpus.size() << " GPU(s) visible (" << CudaVisibleDevicesText(mask)
              << ")";
    for (const auto& g : gpus) LOG(INFO) << who << ":   " << g.ToString();
  }
#endif
  ASSIGN_OR_RETURN(DeviceChoice choice, ChooseDevice(o, visible, GpuBackendBuilt(), mask));
  if (!choice.warning.empty()) LOG(WARNING) << who << ": " << choice.warning;
  std::unique_ptr<ComputeDevice> d(new ComputeDevice());
  d->device_ = choice.device;
  d->options_ = o;
  d->who_ = who;
#if PSTRAIN_HAVE_GPU_BACKEND
  if (choice.device == Device::kGpu) {
    cuda::GpuOptions go;
    go.allow_growth = o.gpu_allow_growth;
    go.memory_fraction = o.gpu_memory_fraction;
    go.cudnn_autotune = o.cudnn_autotune;
    go.cudnn_deterministic = o.cudnn_deterministic;
    go.allow_tf32 = o.allow_tf32;
    go.cudnn_workspace_limit = static_cast<size_t>(o.cudnn_workspace_limit_mb) << 20;
    go.cudnn_graph = o.cudnn_graph;
    go.cudnn_graph_candidates = o.cudnn_graph_candidates;
    go.cudnn_graph_margin = o.cudnn_graph_margin;
    auto gpu = cuda::GpuContext::Create(go);
    if (!gpu.ok()) return gpu.status().WithContext(who + ": opening GPU 0");
    d->gpu_ = std::shared_ptr<cuda::GpuContext>(std::move(gpu).value());
  }
#endif
  LOG(INFO) << who << ": " << d->Description();
  return d;
}

std::unique_ptr<ComputeDevice> ComputeDevice::Cpu() {
  std::unique_ptr<ComputeDevice> d(new ComputeDevice());
  d->options_.device = "cpu";
  return d;
}

std::string ComputeDevice::Description() const {
#if PSTRAIN_HAVE_GPU_BACKEND
  if (gpu_) {
    return "computing on " + gpu_->description().ToString() +
           " with cuDNN and cuBLAS (device memory: allow_growth=" +
           (options_.gpu_allow_growth ? "true" : "false") +
           ", memory_fraction=" + std::to_string(options_.gpu_memory_fraction) +
           (options_.allow_tf32 ? "; convolutions and matrix products in TF32"
                                : "; convolutions in FP32") +
           ", cuDNN algorithms " +
           (options_.cudnn_autotune
                ? (options_.cudnn_graph ? "timed per shape, graph API engines too"
                                        : "timed per shape")
                : "by cuDNN's heuristics") +
           (options_.cudnn_deterministic ? ", deterministic only" : "") + ")";
  }
#endif
  return "computing on the CPU with oneDNN kernels, " + std::to_string(omp_get_max_threads()) +
         " OpenMP threads (" + CudaVisibleDevicesText(std::getenv("CUDA_VISIBLE_DEVICES")) +
         (GpuBackendBuilt() ? "" : "; this binary has no CUDA backend") + ")";
}

int ComputeDevice::WidenToEveryCore() const {
  if (device_ != Device::kCpu) return 0;
  cpu_set_t cores;
  CPU_ZERO(&cores);
  if (sched_getaffinity(0, sizeof(cores), &cores) != 0) return 0;
  const int n = CPU_COUNT(&cores);
  if (n <= omp_get_max_threads()) return 0;
  omp_set_num_threads(n);
  return n;
}

Status ComputeDevice::Place(Model* model) const {
  RETURN_IF_ERROR(model->SetDevice(device_, gpu_.get()));
  if (options_.log_device_placement) {
    const std::string where = gpu_ ? "/device:GPU:0" : "/device:CPU:0";
    for (const auto& l : model->layers()) {
      LOG(INFO) << who_ << ": " << l->Describe() << " placed on " << where << " ("
                << DeviceName(l->device()) << ")";
    }
  }
  return Status::OK();
}

bool ComputeDevice::MemoryStats(AllocatorStats* stats) const {
#if PSTRAIN_HAVE_GPU_BACKEND
  if (gpu_) {
    *stats = gpu_->memory_stats();
    return true;
  }
#endif
  (void)stats;
  return false;
}

std::string ComputeDevice::MemoryStatsLine() const {
  AllocatorStats s;
  if (!MemoryStats(&s)) return "";
  return "GPU memory: in use " + FormatBytes(s.bytes_in_use) + ", peak " +
         FormatBytes(s.peak_bytes_in_use) + ", reserved " + FormatBytes(s.bytes_reserved) + " in " +
         std::to_string(s.num_regions) + " regions, limit " + FormatBytes(s.bytes_limit);
}

}  // namespace worker
}  // namespace pstrain
