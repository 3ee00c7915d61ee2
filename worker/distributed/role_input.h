// What a worker's steps and an evaluator's evaluations read, by the model's kind. An image model
// reads batches from the input pipeline (image_role_input.h); a click model reads its shard of a
// click log, with its embedding layers' rows pulled from the servers that own them before each
// step and their gradients pushed back just before the dense push (click_role_input.h). WorkerRun,
// the training step and the evaluator see only this.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "common/status.h"
#include "worker/distributed/remote_tables.h"
#include "worker/distributed/role_setup.h"
#include "worker/network/model.h"
#include "worker/training/evaluation.h"

namespace pstrain {
class SummaryWriter;
namespace worker {

class PsClient;

class RoleInput {
 public:
  virtual ~RoleInput() = default;

  // Whether `v` is filled by this input, not a server variable: a click model's gathered rows,
  // which PsClient neither pulls nor pushes.
  virtual bool Holds(const Variable* v) const = 0;

  // A worker's, once connected, before its first step at global step `step`: the training data.
  // `client` carries an elastic worker's chunk uses on its pushes; `log`, when not null, gets the
  // first batch's images.
  virtual Status Start(int64_t step, PsClient* client, SummaryWriter* log) = 0;
  // The next training batch, ready for Forward at global step `step` (a click model's rows are
  // in); its examples. OutOfRange when --elastic_data's ledger has leased every epoch.
  virtual Result<int64_t> Next(int64_t step) = 0;
  // That batch through the model in training mode; `before_layer` as Model::Forward's.
  virtual float Forward(Model* model, std::mt19937_64* rng,
                        const std::function<void(int)>& before_layer) = 0;
  // Once the step's gradients are prepared, before the dense push (TrainingStep's
  // set_before_push), at global step `step`: a click model's row gradients to their owners.
  virtual Status PushRows(int64_t step) = 0;

  // The model in evaluation mode over the whole test set, at global step `step`.
  virtual Result<Evaluation> Evaluate(Model* model, int64_t step) = 0;
};

// The model's variables the servers hold: all but those `input` fills.
std::vector<Variable*> ServerVariables(Model* model, const RoleInput& input);

// The input of a role of `s`'s run: a click model's when its config has tables, sharded as
// worker `shard` of `shards` (an evaluator: 0 of 0, evaluating only). `exchange` reaches the
// servers once the role is connected (a click model's rows travel through it).
Result<std::unique_ptr<RoleInput>> OpenRoleInput(RoleSetup& s, const RoleOptions& o, int shard,
                                                 int shards, RemoteTables::Exchange exchange);

}  // namespace worker
}  // namespace pstrain
