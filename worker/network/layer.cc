#include "worker/network/layer.h"

namespace pstrain {
namespace worker {

const char* DeviceName(Device device) { return device == Device::kGpu ? "GPU" : "CPU"; }

void Layer::Forward(const std::vector<const Tensor*>& in, Tensor* out, const LayerContext& ctx) {
  switch (device_) {
    case Device::kCpu:
      ForwardCpu(in, out, ctx);
      return;
    case Device::kGpu:
      ForwardGpu(in, out, ctx);
      return;
  }
}

void Layer::Backward(const std::vector<const Tensor*>& in, const Tensor& out,
                     const Tensor& out_grad, const std::vector<Tensor*>& in_grads,
                     const LayerContext& ctx) {
  switch (device_) {
    case Device::kCpu:
      BackwardCpu(in, out, out_grad, in_grads, ctx);
      return;
    case Device::kGpu:
      BackwardGpu(in, out, out_grad, in_grads, ctx);
      return;
  }
}

Status Layer::GpuSupport() const {
#if PSTRAIN_HAVE_GPU_BACKEND
  return FailedPrecondition(
      Describe() + " is not implemented on GPU (no <name>_cuda file in worker/network/layers/)");
#else
  return FailedPrecondition(Describe() +
                            " cannot run on a GPU: this binary was built without the CUDA backend");
#endif
}

Result<GraphOp> Layer::TensorFlowOp() const {
  return InvalidArgument(Describe() + ": no TensorFlow op (Layer::TensorFlowOp in its .cc file)");
}

Result<GraphOp> Layer::OnnxOp() const {
  return InvalidArgument(Describe() + ": no ONNX form for layer type '" + type_ +
                         "' (Layer::OnnxOp in its .cc file)");
}

void Layer::ForwardGpu(const std::vector<const Tensor*>&, Tensor*, const LayerContext&) {
  LOG(FATAL) << GpuSupport().message();
}

void Layer::BackwardGpu(const std::vector<const Tensor*>&, const Tensor&, const Tensor&,
                        const std::vector<Tensor*>&, const LayerContext&) {
  LOG(FATAL) << GpuSupport().message();
}

int64_t ElementsAtMost(const Shape& shape, int64_t limit) {
  int64_t n = 1;
  for (int64_t d : shape.dims()) {
    if (d < 0 || (d > 0 && n > limit / d)) return -1;
    n *= d;
  }
  return n;
}

Result<Variable*> Layer::AddVariable(const std::string& short_name, const Shape& shape,
                                     bool trainable) {
  const int64_t elements = ElementsAtMost(shape, variable_budget_);
  if (elements < 0) {
    return ShapeError("variable '" + short_name + "' " + shape.ToString() +
                      " would make the model hold more than " + std::to_string(kMaxModelElements) +
                      " values (kMaxModelElements); check the layer's size fields");
  }
  variable_budget_ -= elements;
  Variable v;
  v.name = name_ + "/" + short_name;
  v.value = Tensor(shape);
  if (trainable) v.grad = Tensor(shape);
  v.trainable = trainable;
  variables_.push_back(std::move(v));
  return &variables_.back();
}

LayerRegistry& LayerRegistry::Global() {
  static LayerRegistry* registry = new LayerRegistry();
  return *registry;
}

void LayerRegistry::Register(const std::string& type, Factory factory) {
  CHECK(factories_.emplace(type, std::move(factory)).second)
      << "layer type '" << type << "' registered twice";
}

Result<std::unique_ptr<Layer>> LayerRegistry::Create(const std::string& type,
                                                     const std::string& name) const {
  auto it = factories_.find(type);
  if (it == factories_.end()) {
    std::string known;
    for (const auto& t : Types()) known += (known.empty() ? "" : ", ") + t;
    return InvalidArgument("layer '" + name + "': unknown layer type '" + type +
                           "' (known types: " + known + ")");
  }
  std::unique_ptr<Layer> layer = it->second();
  layer->name_ = name;
  layer->type_ = type;
  return layer;
}

std::vector<std::string> LayerRegistry::Types() const {
  std::vector<std::string> types;
  for (const auto& kv : factories_) types.push_back(kv.first);
  return types;
}

}  // namespace worker
}  // namespace pstrain
