// A model: a list of layers read from a config, each taking the previous layer's output or the
// outputs it names (`inputs: [a, b]`, "input" for the images), ending in a loss layer.
//
//   model:
//     name: refnet
//     input: [1, 28, 28]
//     layers:
//       - {name: conv1, type: conv2d, filters: 32, kernel: 5, padding: SAME}
//       - ...
//       - {name: loss, type: softmax_cross_entropy}
//
// A model of several inputs (dense features and id lists of a click model) names them instead of
// `input:`, and its layers read them by name; such a model runs on the CPU:
//     inputs:
//       - {name: dense, shape: [13]}
//       - {name: C1, shape: [1]}
#pragma once

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/config.h"
#include "worker/network/layer.h"
#include "worker/network/model_device.h"

namespace pstrain {
namespace worker {

// The names a layer's config `spec` reads from: its `inputs` (one name or a list), else
// `previous` (the layer before it, or the model's first input). An entry that is not a name is
// an error naming it. Model::FromConfig and the graph writers read a model alike through this.
Result<std::vector<std::string>> LayerInputNames(const ConfigNode& spec,
                                                 const std::string& previous);

class Model {
 public:
  static Result<std::unique_ptr<Model>> FromConfig(const ConfigNode& model_node);
  // The `model:` section of the config file at `path` (tools and benches that need only the
  // model); errors name the file.
  static Result<std::unique_ptr<Model>> FromConfigFile(const std::string& path);

  const std::string& name() const { return name_; }
  const Shape& input_shape() const { return input_shape_; }  // per example, [C, H, W]
  // The named inputs ("input" alone for a model of one input) and their per-example shapes.
  const std::vector<std::string>& input_names() const { return input_names_; }
  const std::vector<Shape>& input_shapes() const { return input_shapes_; }
  int64_t num_classes() const { return num_classes_; }
  // Every variable in layer order; trainable ones have gradients after Backward().
  std::vector<Variable*> variables();
  std::vector<Variable*> trainable_variables();
  Variable* FindVariable(const std::string& name);
  int64_t num_parameters() const;
  void InitVariables(uint64_t seed);

  // Runs every layer on `device` from now on (`gpu`: the context for Device::kGpu, else null).
  // On the GPU, activations and gradients live in device memory and the variables are mirrored
  // there (uploaded now); a layer without GPU kernels fails the call, naming it, before anything
  // changes.
  Status SetDevice(Device device, cuda::GpuContext* gpu);
  Device device() const { return device_->device(); }
  // GPU only (no-ops on the CPU). Host values -> device, after they changed on the host
  // (a pull, an optimizer step, a restore).
  void UploadVariables();
  // Device -> host: the trainable variables' gradients and the other variables' values
  // (batch-norm statistics), before the host uses them (push, optimizer, checkpoint).
  void DownloadGradients();
  // GPU only: starts copying layer i's gradients (and statistics) to the host as soon as its
  // backward kernels finish, while backward goes on (call from Backward's on_layer_done); the
  // next DownloadGradients waits for these copies and does the rest.
  void DownloadLayerGradientsAsync(int layer);
  // GPU only: waits until the device has finished the work queued so far (before another
  // stream, such as NCCL's, reads what it wrote).
  void Synchronize();
  // With `on`, the optimizer runs where the model computes (device_update.h): the three copies
  // above do nothing, and the host's values and gradients are refreshed only by
  // DeviceUpdate::DownloadState.
  void set_update_on_device(bool on) { update_on_device_ = on; }
  bool update_on_device() const { return update_on_device_; }

  // Runs the layers on a batch [N, C, H, W]; returns the mean loss over the batch.
  // `before_layer(i)`, when given, runs just before layer i does (so that a distributed step can
  // wait there for layer i's values alone; on a GPU they must be uploaded before it returns).
  float Forward(const Tensor& images, const std::vector<int32_t>& labels, bool training,
                std::mt19937_64* rng, const std::function<void(int layer)>& before_layer = {});
  // The same on the CPU with one batch tensor per named input, in input_names() order.
  // Starts moving the next batch to the device while the step's queued kernels run (call it
  // once Backward has queued them); the Forward that gets the same host tensor and labels then
  // reads it there without waiting for a copy. `images` must keep its values until then.
  // Nothing on the CPU.
  void PrefetchInput(const Tensor& images, const std::vector<int32_t>& labels);
  float Forward(const std::vector<const Tensor*>& inputs, const std::vector<int32_t>& labels,
                bool training, std::mt19937_64* rng,
                const std::function<void(int layer)>& before_layer = {});
  // Gradients of the mean loss of the last training Forward(). `on_layer_done(i)`, when given,
  // runs as soon as layer i's variables have their gradients (on a GPU: once the kernels that
  // compute them are queued; see DeviceFence), so that their communication can start while
  // backward goes on.
  void Backward(const std::function<void(int layer)>& on_layer_done = {});
  // GPU: a function that waits until the device has done the work queued so far (a CUDA event);
  // CPU: an empty function (nothing to wait for).
  std::function<Status()> DeviceFence();
  // Logits [N, classes] of the last Forward(), in host memory on either device.
  const Tensor& logits() const;
  // How many examples of the last Forward() have the label as their arg-max logit.
  int64_t CountCorrect(const std::vector<int32_t>& labels) const;

  // One line per layer: name, type, output shape, parameters.
  std::string Summary() const;
  // When on, Forward/Backward time every layer; ProfileReport() lists the totals.
  void set_profiling(bool on) { profiling_ = on; }
  std::string ProfileReport() const;
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  // What layer i reads: j >= 0 is layer j's output, -1 - k the model's input k.
  const std::vector<int>& layer_inputs(int i) const { return nodes_[i].inputs; }

  // A `relu` whose only reader is a `max_pool` runs after the pool, on the pooled values (a
  // quarter of them for 2x2): max commutes with a monotone function, so outputs and gradients
  // are the same (the zeros ReLU writes and the gradient it blocks stay where they were). The
  // layers, their names and variables do not change; only the order Forward/Backward run them
  // in. On by default; off to compare against (tests, bench/refnet_bench.cc).
  void set_relu_after_max_pool(bool on);
  bool relu_after_max_pool() const { return relu_after_max_pool_; }
  // The relus that run after their max_pool now, by name.
  std::vector<std::string> RelusRunAfterMaxPool() const;

  // A layer whose input's gradient is its output's gradient unchanged (add) hands that buffer
  // to the first such input backward reaches instead of copying it there (a residual network's
  // add then copies one gradient, not two); the buffers go back to their nodes when backward
  // ends. The same gradients to the bit. On by default; off to compare against (tests).
  void set_hand_over_gradients(bool on) { hand_over_gradients_ = on; }

 private:
  struct Node {
    std::vector<int> inputs;  // -1 - k is the model's input k
    Shape shape;              // per example
    bool needs_grad = false;  // some trainable variable is at or before this node
    // A max_pool: the relu it reads, run after it (set_relu_after_max_pool); -1 when none.
    int relu_after = -1;
    // A relu that its max_pool runs after itself: never run on its own, no output of its own.
    bool runs_after_pool = false;
  };
  // What layer i is run on: its inputs, or its relu's inputs when the relu runs after it.
  const std::vector<int>& RunInputs(int i) const;
  void PlanReluAfterMaxPool();
  void Allocate(int64_t batch);
  // Reads `input:` or `inputs:` of the model node.
  Status ReadInputs(const ConfigNode& node);
  // The layers' forward pass over inputs_; the mean loss.
  float RunForward(const std::function<void(int layer)>& before_layer);
  const Tensor* Input(int k) const { return k < 0 ? inputs_[-1 - k] : &outputs_[k]; }
  // Runs `run`; when profiling, adds its time (the device synchronised) to (*seconds)[layer].
  void Timed(std::vector<double>* seconds, int layer, const std::function<void()>& run);
  // Per example, the most gradient scratch one layer's backward needs (see Backward).
  int64_t ScratchPerExample() const;

  std::string name_;
  Shape input_shape_;
  std::vector<std::string> input_names_;
  std::vector<Shape> input_shapes_;
  int64_t num_classes_ = 0;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Node> nodes_;
  int64_t batch_ = -1;
  std::vector<Tensor> outputs_, grads_;
  Tensor scratch_grad_;
  int64_t scratch_per_example_ = 0;
  std::vector<const Tensor*> inputs_;
  std::vector<int32_t> labels_;
  LayerContext ctx_;
  bool profiling_ = false;
  bool relu_after_max_pool_ = true;
  bool hand_over_gradients_ = true;
  std::vector<double> forward_seconds_, backward_seconds_;
  // Where the layers run: memory, copies and waits (model_device.h).
  std::unique_ptr<ModelDevice> device_ = NewHostModelDevice();
  bool update_on_device_ = false;
};

}  // namespace worker
}  // namespace pstrain
