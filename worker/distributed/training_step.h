// The life of one distributed training step, as one list of stages a reader follows top to
// bottom in training_step.cc (BytePS names its tensor path the same way: COORDINATE, REDUCE,
// COPYD2H, PUSH, PULL, ...):
//
//   1. forward             the batch through the model; the mean loss
//   2. backward            layer by layer, last first; each layer's gradients are handed on as
//                          soon as backward has them (per-layer readiness): copied to the host,
//                          or into the host's average, while backward goes on below
//   3. gradients to host   a GPU worker's gradients (or its host's device average) to host memory
//   4. host average        the workers of one host average their gradients; only the leader
//                          goes on to stage 5 (HostSync; skipped for a worker alone on its host)
//   5. push and pull       weight decay and global-norm clipping (PrepareGradients), then one
//                          push of the gradients and one pull of the new values (PsClient);
//                          or, overlapped (below), in parts that left during stage 2; with
//                          per-layer pulls (below) the pull moves into the next step's stage 1
//   6. upload              the pulled values to the device; the leader's values to every rank
//
// Where the host average runs decides where stages 3 and 6 happen: in host memory (CPU workers,
// or GPU workers without NCCL) the gradients come to the host before the average and the values
// go back after the leader's broadcast; over NCCL the average and broadcast run on the devices
// and only the leader copies to and from the host, inside its exchange.
//
// Overlapped push (--overlap_push, as ByteScheduler and P3 do): stage 5 starts inside
// stage 2. Each layer's gradients get their weight decay and go to PsClient::Ready as backward
// finishes them; PsClient sends each server's parts of a few MB as they fill, last layer first,
// each followed by a pull of the same variables, and FinishStep waits for what is left. Only
// where every part may be applied on its own and nothing waits for the whole gradient: async
// servers, no worker-side clipping by global norm (it needs every gradient before any can go),
// CPU workers (a GPU's download comes between backward and the push). On a host of several CPU
// workers (--intra_node_sync=cpu) the host average runs in buckets of the part size while
// backward goes on, and the leader hands each averaged tensor to PsClient::Ready from the
// average's thread: its parts leave as soon as every rank's backward produced them, and the
// pulled values go to the ranks with the step's broadcast. Elsewhere the step pushes once per
// server, as before; WhyPushWholeSteps says why,
// and the worker logs it once. By default (--overlap_push=auto) not on loopback either, where
// the transfer is copies by the cores that run backward and the overlap only adds messages.
//
// Per-layer pulls (--pull_schedule per_layer or late, worker/distributed/pull_schedule.h; with
// the overlapped push only): the step's pulls go out by layer, at the step's start or just
// before each layer's forward, and stage 1 waits before each layer for that layer's values
// alone (PsClient::AwaitLayer), so the forward starts on the first layers while the later ones
// are still on the wire and each layer reads values as fresh as its turn allows. Stage 5 then
// pushes without pulling.
//
// Synthetic compute (--synthetic_step_ms, for measuring the exchange at scale without GPUs, as
// tf_cnn_benchmarks' and BytePS's synthetic modes do): stages 1 and 2 become a wait of N ms,
// the time a GPU would spend on the batch, and the gradients are filled with one small
// constant; stages 3 to 6 move the model's real-sized tensors as in a real step. The wait is a
// forward of N/3 ms, then a backward of 2N/3 ms that hands out the layers last first, each after
// its share of the model's parameters (backward costs about twice forward), so that an
// overlapped push starts where a real one would.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "worker/distributed/host_sync.h"
#include "worker/distributed/intra_node.h"
#include "worker/distributed/ps_client.h"
#include "worker/network/device_placement.h"
#include "worker/network/model.h"
#include "worker/training/train_config.h"

namespace pstrain {
namespace worker {

struct StepOutcome {
  float loss = 0;
  PushPullResult exchange;  // the servers' answer: the new global step, dropped gradients
  // Where the step's time went: stages 1-2 and stages 3-6, as the host thread saw them.
  std::chrono::steady_clock::duration compute{}, exchange_wait{};
};

// Why this worker pushes whole steps rather than overlapping its push with backward; empty when
// it may overlap. `async`: the servers run --update_mode=async.
std::string WhyPushWholeSteps(const TrainConfig& train, bool async, bool alone_on_host,
                              Device device);
// Whether every host:port of `hosts` is a loopback address (127.x.x.x, localhost, [::1]):
// --overlap_push=auto does not overlap there.
bool AllOnLoopback(const std::vector<std::string>& hosts);

class TrainingStep {
 public:
  // `group` is null for a worker without intra-node sync. Everything is borrowed.
  // `synthetic_step` > 0: synthetic compute (above) on a model whose host tensors are its
  // only ones (a CPU model).
  TrainingStep(Model* model, const TrainConfig& train, PsClient* client, IntraNodeGroup* group,
               std::string who,
               std::chrono::milliseconds synthetic_step = std::chrono::milliseconds(0))
      : model_(model),
        train_(train),
        client_(client),
        group_(group),
        who_(std::move(who)),
        synthetic_step_(synthetic_step) {}

  // The gradient every element gets in synthetic compute: small, so that momentum and a
  // learning rate of 0.1 move the weights by ~1e-4 a step and nothing diverges.
  static constexpr float kSyntheticGradient = 1e-5f;

  // Before the first step: puts the model on `device` with the servers' current values (the
  // leader pulls, every rank of a host gets its values). Returns the global step.
  Result<int64_t> PullAndPlace(const ComputeDevice& device);

  // The batch's forward in training mode (RoleInput::Forward), its mean loss; `before_layer` as
  // Model::Forward's.
  using Forward = std::function<float(const std::function<void(int)>& before_layer)>;
  // Stages 1 to 6 for one batch. `step` is the global step the worker last saw.
  Result<StepOutcome> Run(const Forward& forward, int64_t step);
  // What goes to the servers in stage 5 before the dense push, once the gradients are prepared:
  // a click model's row gradients (RoleInput::PushRows), so that in accumulate and sync modes
  // they arrive within the step's window, not after it closed. Whole-step pushes only.
  void set_before_push(std::function<Status(int64_t step)> before_push) {
    before_push_ = std::move(before_push);
  }

 private:
  // Stage 2, with per-layer readiness where it pays.
  void Backward();
  // Stage 2's hand-over of layer `layer`'s variables: to the overlapped push, or to the host's
  // average (which, on a leader that pushes parts, pushes each as it is averaged).
  void HandOver(int layer);
  void PushLayer(int layer);
  // The leader's hand-over of one averaged tensor (its variable's) to the overlapped push.
  void PushAveraged(const Tensor* averaged);
  // One variable to the overlapped push: its weight decay, then PsClient::Ready.
  void PushVariable(Variable* v);
  // Stages 1 and 2 in synthetic compute: the fill, then a sleep to `synthetic_step_` after
  // `start` (a GPU's host thread waits the same way, its CPU free for the exchange).
  void SyntheticCompute(std::chrono::steady_clock::time_point start);
  // Stages 3 to 6, by where the host average runs.
  Result<PushPullResult> ExchangeAlone(int64_t step);
  Result<PushPullResult> ExchangeOverlapped();
  Result<PushPullResult> ExchangeThroughHostMemory(int64_t step);
  Result<PushPullResult> ExchangeOnDevices(int64_t step);
  // Stage 5: what the worker does to its gradients, then the push and pull.
  Result<PushPullResult> PushAndPull(int64_t step);

  // Whether the push overlaps backward (PsClient was given a part size for it): for a worker
  // alone, and for a host group whose leader pushes each part as the host's average of it is done.
  bool pushes_parts() const { return group_ == nullptr && client_->push_part_bytes() > 0; }
  bool host_pushes_parts() const { return group_ != nullptr && client_->push_part_bytes() > 0; }
  // Whether this worker sends the overlapped push's parts (alone, or its host's leader).
  bool sends_parts() const {
    return pushes_parts() || (host_pushes_parts() && group_->group.is_leader());
  }
  // Whether the step's pulls go by layer (--pull_schedule per_layer or late), the forward
  // waiting for each layer's.
  bool PullsByLayer() const {
    return pushes_parts() && client_->pull_schedule() != PullSchedule::kStep;
  }
  bool on_devices() const { return group_ != nullptr && group_->mode == IntraNodeSync::kNccl; }
  // Whether backward can hand each layer's tensors to the host average as it finishes them:
  // when the averaged tensors are where backward writes them.
  bool overlaps() const {
    return sync_ != nullptr && (on_devices() || model_->device() == Device::kCpu);
  }
  // Whether stage 2 hands each layer over as it finishes (to the push or the host average).
  bool hands_over_layers() const { return pushes_parts() || overlaps(); }

  Model* model_;
  const TrainConfig& train_;
  PsClient* client_;
  IntraNodeGroup* group_;  // null: no intra-node sync
  std::string who_;
  std::chrono::milliseconds synthetic_step_;  // 0: real forward and backward
  std::unique_ptr<HostSync> sync_;            // stage 4, with a group
  std::unordered_map<const Tensor*, Variable*> variable_of_;  // averaged tensor -> its variable
  std::function<Status(int64_t)> before_push_;
};

}  // namespace worker
}  // namespace pstrain
