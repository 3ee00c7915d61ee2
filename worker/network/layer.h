// A layer of a model: configured from its config node, set up for per-example input shapes,
// then run forward and backward on batches. Layers register themselves by type name
// (PSTRAIN_REGISTER_LAYER), so adding one touches no central file.
//
// Device dispatch happens in exactly one place, Layer::Forward/Backward. A layer's files sit side
// by side in worker/network/layers/: <name>.h and <name>.cc (config, shapes, registration),
// <name>_cpu.cc (ForwardCpu/BackwardCpu) and, with CUDA, <name>_cuda.cc or <name>_cuda.cu
// (ForwardGpu/BackwardGpu; .cu when the layer has kernels of its own); a layer whose base class
// runs its kernels (conv2d and conv2d_transpose: conv_base.h) has neither kernel file.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/graph_op.h"
#include "common/status.h"
#include "common/tensor.h"

namespace pstrain {
namespace worker {

namespace cuda {
class GpuContext;
}

enum class Device { kCpu, kGpu };
const char* DeviceName(Device device);  // "CPU", "GPU"

// A tensor a layer owns. Trainable ones have a gradient of the same shape; state (batch-norm
// moving statistics) has none and is saved in checkpoints all the same.
//
// On a GPU the layer computes with device mirrors (device_value, device_grad: Tensors over
// device memory) while value and grad stay the host copies that the parameter-server client,
// the optimizer and checkpoints use; Model moves data between them explicitly.
struct Variable {
  std::string name;  // "<layer>/<variable>", e.g. "conv1/weights"
  Tensor value;
  Tensor grad;
  bool trainable = true;
  Tensor device_value, device_grad;  // empty on the CPU
};

// The most float32 values a model's variables may hold together (2^28: 1 GiB, 2 GiB with the
// gradients; VGG-16's 138M parameters fit), and the most one example's activations may hold at
// any layer (2^24: 64 MiB). A config asking for more is refused by name before anything is
// allocated.
constexpr int64_t kMaxModelElements = int64_t{1} << 28;
constexpr int64_t kMaxExampleElements = int64_t{1} << 24;

// The elements of `shape`, or -1 when there are more than `limit` (checked before each multiply,
// so that config-sized dims cannot overflow).
int64_t ElementsAtMost(const Shape& shape, int64_t limit);

struct LayerContext {
  bool training = true;
  std::mt19937_64* rng = nullptr;                // dropout masks
  const std::vector<int32_t>* labels = nullptr;  // loss layers
  // On the GPU: the context (handles, streams, allocator) and the labels in device memory.
  cuda::GpuContext* gpu = nullptr;
  const int32_t* device_labels = nullptr;
};

// A layer's name and type are given by the registry that makes it (LayerRegistry::Create), so the
// type name is written once, where the layer registers.
class Layer {
 public:
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  const std::string& type() const { return type_; }
  // "layer 'conv2' (conv2d)", for messages.
  std::string Describe() const { return "layer '" + name_ + "' (" + type_ + ")"; }

  // Reads the layer's fields. Unknown or malformed fields are errors naming the field.
  virtual Status Configure(const ConfigNode& node) = 0;
  // Checks the per-example input shapes (no batch dim), creates the variables, returns the
  // per-example output shape. A mismatch names the layer and the shapes.
  virtual Result<Shape> Setup(const std::vector<Shape>& inputs) = 0;
  virtual int num_inputs() const { return 1; }
  // Whether input `input`'s gradient is the output's gradient unchanged (add), so that the
  // model may hand it the output gradient's buffer instead of a copy.
  virtual bool PassesGradientThrough(int /*input*/) const { return false; }
  // Fills the variables with their initial values.
  virtual void InitVariables(std::mt19937_64* /*rng*/) {}
  std::vector<Variable>& variables() { return variables_; }
  // How many elements this layer's variables may still hold (Model passes what the earlier
  // layers left of kMaxModelElements).
  void set_variable_budget(int64_t elements) { variable_budget_ = elements; }

  // Batch tensors: in[i] is [N, ...inputs[i]], out is [N, ...output] and already allocated.
  void Forward(const std::vector<const Tensor*>& in, Tensor* out, const LayerContext& ctx);
  // Writes the gradients of the inputs that are non-null in `in_grads` and sets (not adds) the
  // gradients of the trainable variables. Called after Forward on the same batch.
  void Backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& out_grad,
                const std::vector<Tensor*>& in_grads, const LayerContext& ctx);

  // What this layer is in other frameworks' graphs, once Setup: its TensorFlow op with the
  // attributes TensorFlow's graph importer requires (TensorBoard's Graphs tab, model_graph.h) and
  // its ONNX operator in inference (onnx_export.h). Each reads the layer's inputs, then its
  // variables in creation order (common/graph_op.h). The defaults are errors naming the layer; a
  // registered layer without both fails LayerCasesTest.
  virtual Result<GraphOp> TensorFlowOp() const;
  virtual Result<GraphOp> OnnxOp() const;

  Device device() const { return device_; }
  // Whether this layer can run on the GPU (in this build, with its configuration); an error
  // naming the layer and the reason otherwise. Model::SetDevice asks before placing anything.
  virtual Status GpuSupport() const;
  // Only Model::SetDevice (or a test placing one layer) calls this, after GpuSupport() is OK
  // and the variables' device mirrors exist.
  void set_device(Device device) { device_ = device; }

 protected:
  Layer() = default;

  virtual void ForwardCpu(const std::vector<const Tensor*>& in, Tensor* out,
                          const LayerContext& ctx) = 0;
  virtual void BackwardCpu(const std::vector<const Tensor*>& in, const Tensor& out,
                           const Tensor& out_grad, const std::vector<Tensor*>& in_grads,
                           const LayerContext& ctx) = 0;
  // Implemented in <name>_cuda.cc|.cu by every layer (PSTRAIN_DECLARE_LAYER declares them); the
  // defaults, left in builds without the GPU backend, stop naming the layer (Model::SetDevice
  // refuses such layers before they run).
  virtual void ForwardGpu(const std::vector<const Tensor*>& in, Tensor* out,
                          const LayerContext& ctx);
  virtual void BackwardGpu(const std::vector<const Tensor*>& in, const Tensor& out,
                           const Tensor& out_grad, const std::vector<Tensor*>& in_grads,
                           const LayerContext& ctx);
  // The returned pointer is valid until the next AddVariable; keep the Tensor handles (they
  // share the buffer) rather than the pointer. Variables are always updated in place. Fails,
  // allocating nothing, when the variable would not fit the layer's budget.
  Result<Variable*> AddVariable(const std::string& short_name, const Shape& shape,
                                bool trainable = true);
  Status ShapeError(const std::string& what) const {
    return InvalidArgument(Describe() + ": " + what);
  }

 private:
  friend class LayerRegistry;

  std::string name_;
  std::string type_;
  std::vector<Variable> variables_;
  int64_t variable_budget_ = kMaxModelElements;
  Device device_ = Device::kCpu;
};

// A layer whose output has its one input's shape (activations, dropout).
class ElementwiseLayer : public Layer {
 public:
  Result<Shape> Setup(const std::vector<Shape>& inputs) override { return inputs[0]; }
};

class LayerRegistry {
 public:
  using Factory = std::function<std::unique_ptr<Layer>()>;
  static LayerRegistry& Global();
  void Register(const std::string& type, Factory factory);
  // A layer of `type` named `name`; unknown types are an error listing the known ones.
  Result<std::unique_ptr<Layer>> Create(const std::string& type, const std::string& name) const;
  std::vector<std::string> Types() const;

 private:
  std::map<std::string, Factory> factories_;
};

// Declares what every layer defines in layers/<name>.cc, <name>_cpu.cc and <name>_cuda.cc|.cu:
// its config, its TensorFlow and ONNX ops, its CPU kernels and its GPU kernels (every layer has
// them: the build compiles each layer's CUDA file). Leaves the class in `protected:`.
#define PSTRAIN_DECLARE_LAYER()                                                               \
 public:                                                                                      \
  Status Configure(const ConfigNode& node) override;                                          \
  Result<GraphOp> TensorFlowOp() const override;                                              \
  Result<GraphOp> OnnxOp() const override;                                                    \
                                                                                              \
 protected:                                                                                   \
  void ForwardCpu(const std::vector<const Tensor*>& in, Tensor* out, const LayerContext& ctx) \
      override;                                                                               \
  void BackwardCpu(const std::vector<const Tensor*>& in, const Tensor& out,                   \
                   const Tensor& out_grad, const std::vector<Tensor*>& in_grads,              \
                   const LayerContext& ctx) override;                                         \
  PSTRAIN_DECLARE_GPU_KERNELS()

// Declares a layer's GPU kernels (defined in layers/<name>_cuda.cc|.cu) in builds with the GPU
// backend; in other builds the layer keeps the base class's refusing defaults. Part of
// PSTRAIN_DECLARE_LAYER; alone where a base class declared the rest (conv_base.h).
#if PSTRAIN_HAVE_GPU_BACKEND
#define PSTRAIN_DECLARE_GPU_KERNELS()                                                         \
 public:                                                                                      \
  Status GpuSupport() const override;                                                         \
                                                                                              \
 protected:                                                                                   \
  void ForwardGpu(const std::vector<const Tensor*>& in, Tensor* out, const LayerContext& ctx) \
      override;                                                                               \
  void BackwardGpu(const std::vector<const Tensor*>& in, const Tensor& out,                   \
                   const Tensor& out_grad, const std::vector<Tensor*>& in_grads,              \
                   const LayerContext& ctx) override;
#else
#define PSTRAIN_DECLARE_GPU_KERNELS()
#endif

#define PSTRAIN_REGISTER_LAYER(type_name, Class)                                                  \
  static const bool PSTRAIN_CONCAT(kRegistered_, Class) = [] {                                    \
    ::pstrain::worker::LayerRegistry::Global().Register(                                          \
        type_name,                                                                                \
        []() -> std::unique_ptr<::pstrain::worker::Layer> { return std::make_unique<Class>(); }); \
    return true;                                                                                  \
  }()

}  // namespace worker
}  // namespace pstrain
