// The variables a parameter server holds, with their optimizer slots, the learning-rate
// schedule, per-variable clipping and the global step. The single-process trainer uses it
// directly (sharing the model's buffers); a server task will hold one for its shard.
//
//   train:
//     optimizer: {type: adam}
//     learning_rate: {schedule: constant, initial: 0.001}
//     clipping: {by_norm: 5.0}          # optional
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "common/tensor.h"
#include "ps/clipping.h"
#include "ps/learning_rate.h"
#include "ps/optimizer.h"

namespace pstrain {
namespace ps {

class VariableStore {
 public:
  // Reads `optimizer`, `learning_rate` and the optional `clipping` from a train config node.
  static Result<std::unique_ptr<VariableStore>> FromConfig(const ConfigNode& train_node);
  VariableStore(std::unique_ptr<Optimizer> optimizer, LearningRateSchedule schedule,
                ClippingOptions clipping);

  // Holds `value` without copying: updates are visible to every holder of the buffer.
  Status AddVariable(const std::string& name, Tensor value);

  // Applies one gradient per named variable and advances the global step. Gradients are
  // clipped by value and by norm here (by global norm is the worker's, over all its gradients).
  // Unknown names, wrong shapes and non-finite gradients are refused before anything changes.
  Status ApplyGradients(const std::vector<std::pair<std::string, Tensor>>& grads);

  // Applies at an explicit step (the learning rate's and Adam's), leaving global_step() alone:
  // a server whose global step is kept elsewhere (PS task 0) uses this.
  // `checked`: the caller has already passed every gradient through CheckGradient (the server
  // checks a push's tensors as it takes them), so they are not scanned twice.
  // `holders`: what other holders of a value's or slot's buffer see. kSeeUpdates (the
  // single-process trainer, whose model shares the buffers) updates in place. kKeepTheirBytes
  // (the server: a pull reply still being sent, a checkpoint being written) leaves a shared
  // buffer as it is: the optimizer writes the new value into the variable's other buffer (the
  // one an earlier reply has released; two per variable, swapped) in the same pass, and a
  // shared slot is copied first (a checkpoint holds them, once per save).
  enum class Checked { kNo, kYes };
  enum class Holders { kSeeUpdates, kKeepTheirBytes };
  Status ApplyGradientsAt(int64_t step, const std::vector<std::pair<std::string, Tensor>>& grads,
                          Checked checked = Checked::kNo, Holders holders = Holders::kSeeUpdates);
  // ApplyGradientsAt in its two halves, so that a replica can be sent what the optimizer sees
  // (docs/replication.md): the gradients checked (unless `checked`) and clipped by value and by
  // norm, and then those applied. Clipping writes into a copy, never into the bytes it was given
  // (a received frame may be forwarded, or still in flight, at the same time); without clipping
  // the prepared gradients share the given buffers.
  using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
  Result<NamedTensors> PrepareGradients(const NamedTensors& grads,
                                        Checked checked = Checked::kNo) const;
  // Applies what PrepareGradients returned, here or on a replica that runs the same optimizer:
  // the update is element-wise, so both end with the same bits whatever their thread counts.
  // Names and shapes must have been checked (PrepareGradients, or CheckGradient).
  Status ApplyPrepared(int64_t step, const NamedTensors& prepared,
                       Holders holders = Holders::kSeeUpdates);
  // Why `grad` cannot be applied to `name` (unknown, wrong shape, NaN/Inf), or OK. `exponent`
  // (if given) receives the largest element's float exponent (biased; 0 for zeros), which the
  // check reads anyway (ps/magnitude_guard.h).
  Status CheckGradient(const std::string& name, const Tensor& grad,
                       uint32_t* exponent = nullptr) const;

  bool Has(const std::string& name) const { return variables_.count(name) > 0; }
  // Drops every variable and its slots (a replica whose copy was found wrong).
  void Clear() { variables_.clear(); }
  // The variable's value (shares the buffer); CHECKs that it exists.
  const Tensor& Value(const std::string& name) const { return variables_.at(name).value; }
  std::vector<std::string> Names() const;
  // Gives `name` a private copy of its value, and of each slot, that another holder shares (an
  // in-flight pull reply, a checkpoint being written), so that the next update cannot tear the
  // bytes being sent or saved.
  void DetachIfShared(const std::string& name);
  // Sets `name`'s value to `value`'s (a pushed batch-norm statistic), in place unless another
  // holder shares the buffer, which then keeps its bytes. CHECKs that `name` exists and that the
  // sizes agree (the push was checked).
  void Assign(const std::string& name, const Tensor& value);

  int64_t global_step() const { return global_step_; }
  void set_global_step(int64_t step) { global_step_ = step; }
  float learning_rate() const { return schedule_.At(global_step_); }
  const Optimizer& optimizer() const { return *optimizer_; }

  // Every variable as "<name>" and every slot as "<name>/<slot>", sharing the buffers, so that
  // a checkpoint restore can copy into them in place.
  std::map<std::string, Tensor> StateTensors() const;

  // What a replica must agree on to stay bitwise equal (docs/replication.md section 2): the
  // train config it was read from (optimizer, learning rate, clipping), or the optimizer's name.
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  struct Entry {
    Tensor value;
    Slots slots;
    // The value's previous buffer after an update written elsewhere (Holders::kKeepTheirBytes):
    // the next such update writes into it once its other holder has let go.
    Tensor spare;
  };
  // The buffer an update of `e` that keeps the value's bytes writes into.
  static Tensor TakeSpare(Entry* e);
  std::unique_ptr<Optimizer> optimizer_;
  LearningRateSchedule schedule_;
  ClippingOptions clipping_;
  std::map<std::string, Entry> variables_;
  int64_t global_step_ = 0;
  std::string fingerprint_;
};

}  // namespace ps
}  // namespace pstrain
