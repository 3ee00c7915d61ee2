#include "worker/distributed/training_step.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <thread>

#include "worker/training/gradient_preparation.h"

namespace pstrain {
namespace worker {

std::string WhyPushWholeSteps(const TrainConfig& train, bool async, bool alone_on_host,
                              Device device) {
  if (!async) return "the servers accumulate or sync, which count whole pushes";
  if (train.clipping.WorkerSide().by_global_norm) {
    return "clip_by_global_norm needs every gradient before any can go";
  }
  if (device != Device::kCpu) {
    return alone_on_host ? "a GPU's gradients reach the host after backward"
                         : "a GPU host's average and its download come between backward and the "
                           "push";
  }
  return "";
}

bool AllOnLoopback(const std::vector<std::string>& hosts) {
  for (const std::string& h : hosts) {
    const std::string host = h.substr(0, h.rfind(':'));
    if (host.rfind("127.", 0) != 0 && host != "localhost" && host != "[::1]") return false;
  }
  return !hosts.empty();
}

Result<StepOutcome> TrainingStep::Run(const Forward& forward, int64_t step) {
  StepOutcome outcome;
  const auto started = std::chrono::steady_clock::now();
  Status diverged = Status::OK();
  if (sends_parts()) client_->BeginStep(step);
  if (synthetic_step_.count() > 0) {
    // 1 and 2 as a GPU's time: no forward, no backward, the loss stays 0; the layers are handed
    // over during the wait as a real backward would.
    SyntheticCompute(std::chrono::steady_clock::now());
  } else {
    // 1. forward; with per-layer pulls each layer first waits for its own values
    Status pulled = Status::OK();
    outcome.loss = forward(PullsByLayer() ? std::function<void(int)>([&](int layer) {
      if (pulled.ok()) pulled = client_->AwaitLayer(layer);
    })
                                          : std::function<void(int)>());
    if (!pulled.ok()) return pulled.WithContext(who_ + ": step " + std::to_string(step));
    if (!std::isfinite(outcome.loss)) {
      diverged =
          Internal(who_ + ": step " + std::to_string(step) + ": the loss is " +
                   std::to_string(outcome.loss) + "; training diverged (lower the learning rate)");
    }
    // Within a host group every rank must make this step's collectives, so a rank that
    // diverged says so after them (its NaN gradients make the leader's push fail, and with it
    // every rank of the host); alone, it stops at once.
    if (!diverged.ok() && group_ == nullptr) return diverged;

    // 2. backward, each layer's gradients handed on as soon as they are ready
    Backward();
  }

  // 3 to 6. gradients to the host, host average, push and pull, upload
  const auto computed = std::chrono::steady_clock::now();
  outcome.compute = computed - started;
  Result<PushPullResult> exchanged = pushes_parts()      ? ExchangeOverlapped()
                                     : group_ == nullptr ? ExchangeAlone(step)
                                     : on_devices()      ? ExchangeOnDevices(step)
                                                         : ExchangeThroughHostMemory(step);
  outcome.exchange_wait = std::chrono::steady_clock::now() - computed;
  if (!diverged.ok()) return diverged;
  if (!exchanged.ok())
    return exchanged.status().WithContext(who_ + ": step " + std::to_string(step));
  outcome.exchange = *exchanged;
  return outcome;
}

void TrainingStep::Backward() {
  if (hands_over_layers()) {
    if (overlaps()) sync_->StartBackward();
    model_->Backward([&](int layer) { HandOver(layer); });
    if (sends_parts()) client_->BackwardDone();
    return;
  }
  if (on_devices()) return model_->Backward();  // NCCL averages after backward: nothing to copy
  // Alone, or averaging in host memory from a GPU: each layer's gradients start their copy to
  // the host as soon as backward has them (nothing to copy on the CPU).
  model_->Backward([&](int layer) { model_->DownloadLayerGradientsAsync(layer); });
}

void TrainingStep::HandOver(int layer) {
  if (pushes_parts()) return PushLayer(layer);
  // Each layer's averaged tensors join the host average as backward finishes them; on a GPU
  // the fence waits for the kernels that write them.
  std::function<Status()> fence = model_->DeviceFence();
  for (Variable& v : model_->layers()[layer]->variables()) {
    sync_->Ready(AveragedTensorOf(&v, on_devices()), fence);
  }
}

void TrainingStep::PushAveraged(const Tensor* averaged) {
  auto it = variable_of_.find(averaged);
  if (it != variable_of_.end()) PushVariable(it->second);
}

void TrainingStep::PushLayer(int layer) {
  for (Variable& v : model_->layers()[layer]->variables()) PushVariable(&v);
}

void TrainingStep::PushVariable(Variable* v) {
  AddWeightDecay(train_, v);
  // A failed send is kept by the client and returned by FinishStep, after backward.
  (void)client_->Ready(v);
}

void TrainingStep::SyntheticCompute(std::chrono::steady_clock::time_point start) {
  // No forward to wait in: every layer's values first (a failed pull is FinishStep's error).
  for (int i = 0; PullsByLayer() && i < static_cast<int>(model_->layers().size()); ++i) {
    if (!client_->AwaitLayer(i).ok()) break;
  }
  // Every gradient, and every averaged value (batch-norm statistics) left as it is; the fill
  // is the only pass over the tensors. Stage 4 and PrepareGradients may rewrite them in place,
  // so it is done every step.
  for (Variable* v : model_->trainable_variables()) {
    std::fill(v->grad.data(), v->grad.data() + v->grad.size(), kSyntheticGradient);
  }
  if (hands_over_layers()) {
    // Forward a third of the step, then backward hands out the layers, last first, each at the
    // end of its share of the parameters.
    if (overlaps()) sync_->StartBackward();
    const auto forward = synthetic_step_ / 3, backward = synthetic_step_ - forward;
    int64_t total = 0, done = 0;
    for (Variable* v : model_->variables()) total += v->value.size();
    const auto& layers = model_->layers();
    for (int i = static_cast<int>(layers.size()) - 1; i >= 0; --i) {
      if (layers[i]->variables().empty()) continue;
      for (const Variable& v : layers[i]->variables()) done += v.value.size();
      std::this_thread::sleep_until(start + forward +
                                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                        backward * (static_cast<double>(done) / total)));
      HandOver(i);
    }
    if (sends_parts()) client_->BackwardDone();
  }
  std::this_thread::sleep_until(start + synthetic_step_);
}

Result<PushPullResult> TrainingStep::ExchangeAlone(int64_t step) {
  model_->DownloadGradients();                            // 3. gradients to the host
  ASSIGN_OR_RETURN(PushPullResult r, PushAndPull(step));  // 5. push and pull
  model_->UploadVariables();                              // 6. upload
  return r;
}

Result<PushPullResult> TrainingStep::ExchangeOverlapped() {
  // 5. the parts backward did not send, every reply; the pulled values are in as they came.
  ASSIGN_OR_RETURN(PushPullResult r, client_->FinishStep());
  model_->UploadVariables();  // 6. (nothing to do on the CPU)
  return r;
}

Result<PushPullResult> TrainingStep::ExchangeThroughHostMemory(int64_t step) {
  model_->DownloadGradients();  // 3. gradients to the host
  // 4. host average; 5. the leader pushes and pulls (the parts not pushed during backward, and
  // every reply, when it pushes parts); 6. its values to every rank
  ASSIGN_OR_RETURN(PushPullResult r, sync_->PushAndPull([&]() -> Result<PushPullResult> {
    return sends_parts() ? client_->FinishStep() : PushAndPull(step);
  }));
  model_->UploadVariables();  // 6. upload to the device
  return r;
}

Result<PushPullResult> TrainingStep::ExchangeOnDevices(int64_t step) {
  model_->Synchronize();  // backward's gradients are complete before NCCL reads them
  // 4. host average on the devices; the leader alone does 3, 5 and 6; then NCCL broadcasts.
  return sync_->PushAndPull([&]() -> Result<PushPullResult> {
    model_->DownloadGradients();                            // 3. the host's average
    ASSIGN_OR_RETURN(PushPullResult r, PushAndPull(step));  // 5. push and pull
    model_->UploadVariables();                              // 6. upload
    model_->Synchronize();  // NCCL's stream broadcasts the uploaded values next
    return r;
  });
}

Result<PushPullResult> TrainingStep::PushAndPull(int64_t step) {
  PrepareGradients(train_, model_);  // weight decay, global-norm clipping
  if (before_push_) RETURN_IF_ERROR(before_push_(step));
  return client_->PushAndPull(step);
}

Result<int64_t> TrainingStep::PullAndPlace(const ComputeDevice& device) {
  if (group_ == nullptr) {
    ASSIGN_OR_RETURN(int64_t step, client_->Pull());
    RETURN_IF_ERROR(device.Place(model_));  // uploads the pulled values on a GPU
    return step;
  }
  if (!on_devices()) {
    // Buckets no larger than the push's parts, so that a part leaves as soon as it is averaged.
    BucketOptions buckets;
    if (host_pushes_parts()) buckets.max_bucket_bytes = client_->push_part_bytes();
    sync_ = std::make_unique<HostSync>(group_->collectives.get(),
                                       HostTensorsOf(model_->variables()), buckets);
    if (sends_parts()) {
      for (Variable* v : model_->variables()) variable_of_[AveragedTensorOf(v, false)] = v;
      sync_->set_on_averaged([this](const Tensor* averaged) { PushAveraged(averaged); });
    }
    ASSIGN_OR_RETURN(int64_t step, sync_->Pull([&] { return client_->Pull(); }));
    RETURN_IF_ERROR(device.Place(model_));
    return step;
  }
  RETURN_IF_ERROR(device.Place(model_));  // the device mirrors exist from here on
  model_->Synchronize();  // the upload is done before NCCL's stream writes the same memory
  sync_ =
      std::make_unique<HostSync>(group_->collectives.get(), DeviceTensorsOf(model_->variables()));
  return sync_->Pull([&]() -> Result<int64_t> {
    ASSIGN_OR_RETURN(int64_t step, client_->Pull());
    model_->UploadVariables();
    model_->Synchronize();  // NCCL's stream reads the uploaded values next
    return step;
  });
}

}  // namespace worker
}  // namespace pstrain
