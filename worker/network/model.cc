#include "worker/network/model.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>
#include <utility>

#include "worker/network/layers/pool2d.h"
#include "worker/network/layers/relu.h"
#include "worker/network/layers/softmax_cross_entropy.h"

namespace pstrain {
namespace worker {

Result<std::vector<std::string>> LayerInputNames(const ConfigNode& spec,
                                                 const std::string& previous) {
  if (!spec.Has("inputs")) return std::vector<std::string>{previous};
  ASSIGN_OR_RETURN(ConfigNode in, spec.Child("inputs"));
  if (!in.IsSequence()) {
    ASSIGN_OR_RETURN(std::string name, spec.GetString("inputs"));
    return std::vector<std::string>{name};
  }
  std::vector<std::string> names;
  for (size_t k = 0; k < in.size(); ++k) {
    // Read through a one-field map; its errors would name that map, not this entry.
    const ConfigNode item = in.At(k);
    auto wrapper = ConfigNode::Parse("v: " + item.ToYaml(), item.Where());
    auto name = wrapper.ok() ? wrapper->GetString("v") : Result<std::string>(wrapper.status());
    if (!name.ok()) return item.Error("must be the name of an earlier layer or 'input'");
    names.push_back(*name);
  }
  return names;
}

Result<std::unique_ptr<Model>> Model::FromConfigFile(const std::string& path) {
  ASSIGN_OR_RETURN(ConfigNode config, ConfigNode::LoadFile(path));
  Result<ConfigNode> model_node = config.Child("model");
  if (!model_node.ok()) return model_node.status().WithContext(path);
  return FromConfig(model_node.value());
}

Result<std::unique_ptr<Model>> Model::FromConfig(const ConfigNode& node) {
  RETURN_IF_ERROR(node.CheckKeys({"name", "input", "inputs", "layers"}));
  auto model = std::unique_ptr<Model>(new Model());
  ASSIGN_OR_RETURN(model->name_, node.GetString("name", "model"));
  RETURN_IF_ERROR(model->ReadInputs(node));
  ASSIGN_OR_RETURN(ConfigNode layers, node.Child("layers"));
  if (!layers.IsSequence() || layers.size() == 0) {
    return layers.Error("must be a non-empty list of layers");
  }
  std::map<std::string, int> index;
  int64_t elements = 0;  // in the variables of the layers so far
  for (size_t i = 0; i < layers.size(); ++i) {
    ConfigNode spec = layers.At(i);
    ASSIGN_OR_RETURN(std::string name, spec.GetString("name"));
    ASSIGN_OR_RETURN(std::string type, spec.GetString("type"));
    auto where = [&](const Status& s) { return s.WithContext(spec.Where()); };
    const auto& inputs = model->input_names_;
    if (index.count(name) || std::find(inputs.begin(), inputs.end(), name) != inputs.end()) {
      return spec.Error("layer name '" + name + "' is used twice (or names a model input)");
    }
    auto created = LayerRegistry::Global().Create(type, name);
    if (!created.ok()) return where(created.status());
    std::unique_ptr<Layer> layer = std::move(created).value();
    Status configured = layer->Configure(spec);
    if (!configured.ok()) return configured.WithContext(layer->Describe());

    Node n;
    ASSIGN_OR_RETURN(
        std::vector<std::string> input_names,
        LayerInputNames(spec, i == 0 ? model->input_names_[0] : model->layers_.back()->name()));
    if (static_cast<int>(input_names.size()) != layer->num_inputs()) {
      return spec.Error(layer->Describe() + " takes " + std::to_string(layer->num_inputs()) +
                        " input(s), got " + std::to_string(input_names.size()));
    }
    std::vector<Shape> shapes;
    for (const std::string& in : input_names) {
      const auto named = std::find(inputs.begin(), inputs.end(), in);
      if (named != inputs.end()) {
        const int k = static_cast<int>(named - inputs.begin());
        n.inputs.push_back(-1 - k);
        shapes.push_back(model->input_shapes_[k]);
        continue;
      }
      auto it = index.find(in);
      if (it == index.end()) {
        return spec.Error(layer->Describe() + ": input '" + in +
                          "' is not a layer defined before it");
      }
      n.inputs.push_back(it->second);
      shapes.push_back(model->nodes_[it->second].shape);
    }
    layer->set_variable_budget(kMaxModelElements - elements);
    auto shape = layer->Setup(shapes);
    if (!shape.ok()) return where(shape.status());
    n.shape = shape.value();
    if (ElementsAtMost(n.shape, kMaxExampleElements) < 0) {
      return spec.Error(layer->Describe() + ": output " + n.shape.ToString() + " holds more than " +
                        std::to_string(kMaxExampleElements) + " values per example");
    }
    for (const auto& v : layer->variables()) elements += v.value.size();
    bool trainable = false;
    for (const auto& v : layer->variables()) trainable |= v.trainable;
    n.needs_grad = trainable;
    for (int in : n.inputs) n.needs_grad |= in >= 0 && model->nodes_[in].needs_grad;
    index[name] = static_cast<int>(model->layers_.size());
    model->nodes_.push_back(n);
    model->layers_.push_back(std::move(layer));
  }
  Layer* last = model->layers_.back().get();
  if (!dynamic_cast<SoftmaxCrossEntropy*>(last)) {
    return layers.Error("the last layer must be softmax_cross_entropy, got " + last->Describe());
  }
  for (size_t i = 0; i + 1 < model->layers_.size(); ++i) {
    if (dynamic_cast<SoftmaxCrossEntropy*>(model->layers_[i].get())) {
      return layers.Error(model->layers_[i]->Describe() + " must be the last layer");
    }
  }
  model->num_classes_ = model->nodes_[model->nodes_.back().inputs[0]].shape.dim(0);
  model->PlanReluAfterMaxPool();
  model->scratch_per_example_ = model->ScratchPerExample();
  return model;
}

Status Model::ReadInputs(const ConfigNode& node) {
  if (node.Has("input") == node.Has("inputs")) {
    return node.Error("give either 'input' ([channels, height, width]) or 'inputs' (named)");
  }
  if (node.Has("input")) {
    ASSIGN_OR_RETURN(std::vector<int64_t> input, node.GetIntList("input"));
    if (input.size() != 3 || input[0] < 1 || input[1] < 1 || input[2] < 1) {
      return node.Error("field 'input' must be [channels, height, width]");
    }
    input_names_ = {"input"};
    input_shapes_ = {Shape(input)};
  } else {
    ASSIGN_OR_RETURN(ConfigNode list, node.Child("inputs"));
    if (!list.IsSequence() || list.size() == 0) {
      return list.Error("must be a non-empty list of {name, shape}");
    }
    for (size_t k = 0; k < list.size(); ++k) {
      const ConfigNode item = list.At(k);
      RETURN_IF_ERROR(item.CheckKeys({"name", "shape"}));
      ASSIGN_OR_RETURN(std::string name, item.GetString("name"));
      ASSIGN_OR_RETURN(std::vector<int64_t> shape, item.GetIntList("shape"));
      if (shape.empty() || *std::min_element(shape.begin(), shape.end()) < 1) {
        return item.Error("field 'shape' must be a non-empty list of sizes >= 1");
      }
      if (std::find(input_names_.begin(), input_names_.end(), name) != input_names_.end()) {
        return item.Error("input name '" + name + "' is used twice");
      }
      // The exports' own names: TensorBoard's graph feeds "labels", ONNX gives "logits" and
      // "probabilities".
      for (const char* reserved : {"labels", "logits", "probabilities"}) {
        if (name == reserved) {
          return item.Error("input name '" + name +
                            "' is reserved (labels, logits, probabilities); give it another");
        }
      }
      input_names_.push_back(name);
      input_shapes_.push_back(Shape(shape));
    }
  }
  for (const Shape& shape : input_shapes_) {
    if (ElementsAtMost(shape, kMaxExampleElements) < 0) {
      return node.Error("input " + shape.ToString() + " holds more than " +
                        std::to_string(kMaxExampleElements) + " values per example");
    }
  }
  input_shape_ = input_shapes_[0];
  return Status::OK();
}

void Model::set_relu_after_max_pool(bool on) {
  relu_after_max_pool_ = on;
  PlanReluAfterMaxPool();
  scratch_per_example_ = ScratchPerExample();
  batch_ = -1;  // the relu's own output is allocated only when it runs on its own
}

void Model::PlanReluAfterMaxPool() {
  for (Node& n : nodes_) {
    n.relu_after = -1;
    n.runs_after_pool = false;
  }
  if (!relu_after_max_pool_) return;
  std::vector<int> readers(nodes_.size(), 0);
  for (const Node& n : nodes_) {
    for (int k : n.inputs) {
      if (k >= 0) ++readers[k];  // -1: the model's input
    }
  }
  for (size_t j = 0; j < nodes_.size(); ++j) {
    if (nodes_[j].inputs.size() != 1 || !dynamic_cast<MaxPool2D*>(layers_[j].get())) continue;
    const int r = nodes_[j].inputs[0];
    // Only a relu nothing else reads: its full-size output is never made.
    if (r < 0 || readers[r] != 1 || !dynamic_cast<Relu*>(layers_[r].get())) continue;
    nodes_[j].relu_after = r;
    nodes_[r].runs_after_pool = true;
  }
}

std::vector<std::string> Model::RelusRunAfterMaxPool() const {
  std::vector<std::string> names;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].runs_after_pool) names.push_back(layers_[i]->name());
  }
  return names;
}

const std::vector<int>& Model::RunInputs(int i) const {
  const int relu = nodes_[i].relu_after;
  return relu >= 0 ? nodes_[relu].inputs : nodes_[i].inputs;
}

int64_t Model::ScratchPerExample() const {
  // Backward's walk (see Backward): an input whose gradient an earlier-walked layer already
  // wrote gets its share in scratch, then added. A layer may need several such slots at once
  // (add [c, c], or two layers both reading x and y), each a region of its own.
  std::vector<bool> written(nodes_.size(), false);
  written.back() = true;
  int64_t most = 0;
  for (int i = static_cast<int>(nodes_.size()) - 1; i >= 0; --i) {
    if (!written[i]) continue;
    int64_t need = 0;
    for (int k : RunInputs(i)) {
      if (k < 0 || !nodes_[k].needs_grad) continue;
      if (written[k]) need += nodes_[k].shape.num_elements();
      written[k] = true;
    }
    most = std::max(most, need);
  }
  return most;
}

std::vector<Variable*> Model::variables() {
  std::vector<Variable*> out;
  for (auto& l : layers_) {
    for (auto& v : l->variables()) out.push_back(&v);
  }
  return out;
}

std::vector<Variable*> Model::trainable_variables() {
  std::vector<Variable*> out;
  for (Variable* v : variables()) {
    if (v->trainable) out.push_back(v);
  }
  return out;
}

Variable* Model::FindVariable(const std::string& name) {
  for (Variable* v : variables()) {
    if (v->name == name) return v;
  }
  return nullptr;
}

int64_t Model::num_parameters() const {
  int64_t n = 0;
  for (const auto& l : layers_) {
    for (const auto& v : l->variables()) n += v.trainable ? v.value.size() : 0;
  }
  return n;
}

void Model::InitVariables(uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (auto& l : layers_) l->InitVariables(&rng);
}

Status Model::SetDevice(Device device, cuda::GpuContext* gpu) {
  std::unique_ptr<ModelDevice> next;
  if (device == Device::kCpu) {
    next = NewHostModelDevice();
  } else if (input_names_.size() > 1) {
    return FailedPrecondition("model '" + name_ + "' has " + std::to_string(input_names_.size()) +
                              " named inputs; such a model runs on the CPU only");
  } else {
    for (const auto& l : layers_) RETURN_IF_ERROR(l->GpuSupport());
    ASSIGN_OR_RETURN(next, NewGpuModelDevice(gpu, name_));
  }
  for (auto& l : layers_) {
    Status placed = next->Place(l.get());
    if (!placed.ok()) return placed.WithContext("model '" + name_ + "'");
  }
  device_ = std::move(next);
  batch_ = -1;
  return Status::OK();
}

void Model::UploadVariables() {
  if (!update_on_device_) device_->UploadValues(variables());
}

void Model::DownloadGradients() {
  if (!update_on_device_) device_->DownloadGradients(layers_);
}

void Model::DownloadLayerGradientsAsync(int layer) {
  if (!update_on_device_) device_->DownloadLayerGradientsAsync(layers_, layer);
}

void Model::Synchronize() { device_->Synchronize(); }

void Model::Allocate(int64_t batch) {
  if (batch == batch_) return;
  batch_ = batch;
  outputs_.clear();
  grads_.clear();
  const std::string who = "model '" + name_ + "' batch " + std::to_string(batch);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    std::vector<int64_t> dims{batch};
    dims.insert(dims.end(), n.shape.dims().begin(), n.shape.dims().end());
    const std::string what = who + ": " + layers_[i]->name();
    if (n.runs_after_pool) {  // its pool's output holds its values
      outputs_.emplace_back();
      grads_.emplace_back();
      continue;
    }
    outputs_.push_back(device_->NewTensor(Shape(dims), what + " output"));
    grads_.push_back(n.needs_grad || i + 1 == nodes_.size()
                         ? device_->NewTensor(Shape(dims), what + " gradient")
                         : Tensor());
  }
  scratch_grad_ = scratch_per_example_ > 0 ? device_->NewTensor(Shape{batch * scratch_per_example_},
                                                                who + ": gradient scratch")
                                           : Tensor();
}

float Model::Forward(const Tensor& images, const std::vector<int32_t>& labels, bool training,
                     std::mt19937_64* rng, const std::function<void(int layer)>& before_layer) {
  CHECK_EQ(images.shape().WithoutBatch(), input_shape_)
      << "model '" << name_ << "' expects images " << input_shape_.ToString() << ", got "
      << images.shape().ToString();
  const int64_t n = images.dim(0);
  CHECK_EQ(static_cast<int64_t>(labels.size()), n);
  Allocate(n);
  labels_ = labels;
  ctx_ = LayerContext{training, rng, &labels_};
  inputs_ = {device_->UploadBatch(images, labels, num_classes_, &ctx_)};
  return RunForward(before_layer);
}

void Model::PrefetchInput(const Tensor& images, const std::vector<int32_t>& labels) {
  CHECK_EQ(images.shape().WithoutBatch(), input_shape_)
      << "model '" << name_ << "' expects images " << input_shape_.ToString() << ", got "
      << images.shape().ToString();
  CHECK_EQ(static_cast<int64_t>(labels.size()), images.dim(0));
  device_->PrefetchBatch(images, labels);
}

float Model::Forward(const std::vector<const Tensor*>& inputs, const std::vector<int32_t>& labels,
                     bool training, std::mt19937_64* rng,
                     const std::function<void(int layer)>& before_layer) {
  CHECK(device_->device() == Device::kCpu)
      << "model '" << name_ << "': named inputs run on the CPU";
  CHECK_EQ(inputs.size(), input_shapes_.size()) << "model '" << name_ << "' inputs";
  const int64_t n = inputs[0]->dim(0);
  for (size_t k = 0; k < inputs.size(); ++k) {
    CHECK(inputs[k]->dim(0) == n && inputs[k]->shape().WithoutBatch() == input_shapes_[k])
        << "model '" << name_ << "' input '" << input_names_[k] << "' expects "
        << input_shapes_[k].ToString() << " per example, got " << inputs[k]->shape().ToString();
  }
  CHECK_EQ(static_cast<int64_t>(labels.size()), n);
  Allocate(n);
  labels_ = labels;
  ctx_ = LayerContext{training, rng, &labels_};
  inputs_ = inputs;
  return RunForward(before_layer);
}

float Model::RunForward(const std::function<void(int layer)>& before_layer) {
  std::vector<const Tensor*> in;
  for (int i = 0; i < static_cast<int>(layers_.size()); ++i) {
    if (nodes_[i].runs_after_pool) continue;
    in.clear();
    for (int k : RunInputs(i)) in.push_back(Input(k));
    if (before_layer) before_layer(i);
    Timed(&forward_seconds_, i, [&] { layers_[i]->Forward(in, &outputs_[i], ctx_); });
    if (const int relu = nodes_[i].relu_after; relu >= 0) {  // in place, on the pooled values
      Timed(&forward_seconds_, relu,
            [&] { layers_[relu]->Forward({&outputs_[i]}, &outputs_[i], ctx_); });
    }
  }
  return device_->FinishForward(outputs_.back(), outputs_[nodes_.back().inputs[0]]);
}

void Model::Backward(const std::function<void(int layer)>& on_layer_done) {
  CHECK(ctx_.training) << "Backward() needs a training Forward() first";
  const int64_t n = batch_;
  device_->Fill(&grads_.back(), 1.0f / static_cast<float>(n));
  std::vector<bool> written(layers_.size(), false);
  written.back() = true;
  std::vector<const Tensor*> in;
  std::vector<Tensor*> in_grads;
  // Gradient buffers handed from a layer's output to its input (hand_over_gradients_), in the
  // order handed: each pair swaps back when backward ends.
  std::vector<std::pair<int, int>> handed;
  for (int i = static_cast<int>(layers_.size()) - 1; i >= 0; --i) {
    if (!written[i]) continue;  // nothing downstream needs this output's gradient
    in.clear();
    in_grads.clear();
    std::vector<int> accumulate;
    const std::vector<int>& inputs = RunInputs(i);
    const int relu = nodes_[i].relu_after;
    const Tensor* out_grad = &grads_[i];
    for (size_t j = 0; j < inputs.size(); ++j) {
      const int k = inputs[j];
      in.push_back(Input(k));
      if (k < 0 || !nodes_[k].needs_grad) {
        in_grads.push_back(nullptr);
      } else if (!written[k]) {
        written[k] = true;
        if (hand_over_gradients_ && relu < 0 && out_grad == &grads_[i] &&
            layers_[i]->PassesGradientThrough(static_cast<int>(j)) &&
            grads_[k].shape() == grads_[i].shape()) {
          // k's gradient is this output's: k takes the buffer, the layer writes nothing there.
          std::swap(grads_[k], grads_[i]);
          handed.emplace_back(k, i);
          out_grad = &grads_[k];
          in_grads.push_back(nullptr);
        } else {
          in_grads.push_back(&grads_[k]);
        }
      } else {
        // A second consumer of k: compute into scratch, then add.
        in_grads.push_back(nullptr);
        accumulate.push_back(static_cast<int>(in_grads.size()) - 1);
      }
    }
    std::vector<Tensor> scratch(accumulate.size());  // regions of scratch_grad_, in slot order
    int64_t offset = 0;
    for (size_t a = 0; a < accumulate.size(); ++a) {
      const Tensor& g = grads_[inputs[accumulate[a]]];
      CHECK_LE(offset + g.size(), scratch_grad_.size()) << "scratch for " << layers_[i]->Describe();
      scratch[a] = Tensor::Wrap(g.shape(), scratch_grad_.data() + offset, nullptr);
      offset += g.size();
      in_grads[accumulate[a]] = &scratch[a];
    }
    if (relu >= 0) {  // the pooled values' gradient through the relu, in place
      Timed(&backward_seconds_, relu, [&] {
        layers_[relu]->Backward({&outputs_[i]}, outputs_[i], grads_[i], {&grads_[i]}, ctx_);
      });
    }
    Timed(&backward_seconds_, i,
          [&] { layers_[i]->Backward(in, outputs_[i], *out_grad, in_grads, ctx_); });
    for (size_t a = 0; a < accumulate.size(); ++a) {
      device_->Accumulate(scratch[a], &grads_[inputs[accumulate[a]]]);
    }
    if (on_layer_done) on_layer_done(i);
    if (on_layer_done && relu >= 0) on_layer_done(relu);
  }
  // Every node's gradient buffer back where Allocate put it (the pointers stay the same from
  // step to step; the activations' gradients are not read after backward).
  for (auto it = handed.rbegin(); it != handed.rend(); ++it) {
    std::swap(grads_[it->first], grads_[it->second]);
  }
}

void Model::Timed(std::vector<double>* seconds, int layer, const std::function<void()>& run) {
  if (!profiling_) return run();
  auto t0 = std::chrono::steady_clock::now();
  run();
  Synchronize();
  seconds->resize(layers_.size());
  (*seconds)[layer] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::function<Status()> Model::DeviceFence() { return device_->Fence(); }

const Tensor& Model::logits() const {
  return device_->HostLogits(outputs_[nodes_.back().inputs[0]]);
}

int64_t Model::CountCorrect(const std::vector<int32_t>& labels) const {
  const Tensor& z = logits();
  const int64_t n = z.dim(0), k = z.dim(1);
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = z.data() + i * k;
    int64_t best = 0;
    for (int64_t j = 1; j < k; ++j) best = row[j] > row[best] ? j : best;
    correct += best == labels[i];
  }
  return correct;
}

std::string Model::Summary() const {
  std::ostringstream s;
  s << "model '" << name_ << "': input " << input_shape_.ToString() << ", " << num_parameters()
    << " parameters\n";
  for (size_t i = 0; i < layers_.size(); ++i) {
    int64_t params = 0;
    for (const auto& v : layers_[i]->variables()) params += v.trainable ? v.value.size() : 0;
    s << "  " << layers_[i]->name() << " (" << layers_[i]->type() << ") -> "
      << nodes_[i].shape.ToString() << (params ? ", " + std::to_string(params) + " params" : "")
      << "\n";
  }
  return s.str();
}

std::string Model::ProfileReport() const {
  std::string out = "layer                 forward s   backward s\n";
  char line[128];
  for (size_t i = 0; i < layers_.size(); ++i) {
    std::snprintf(line, sizeof(line), "%-20s %10.3f %12.3f\n", layers_[i]->name().c_str(),
                  i < forward_seconds_.size() ? forward_seconds_[i] : 0.0,
                  i < backward_seconds_.size() ? backward_seconds_[i] : 0.0);
    out += line;
  }
  return out;
}

}  // namespace worker
}  // namespace pstrain
