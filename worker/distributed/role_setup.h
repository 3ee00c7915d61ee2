// What a worker and an evaluator read before they connect: the config's model, train and input
// sections, and how many steps the run takes. Both roles read them the same way, so that an
// evaluator evaluates the model the workers train and stops where they stop.
#pragma once

#include <cstdint>
#include <memory>

#include "common/config.h"
#include "worker/distributed/worker_role.h"
#include "worker/network/model.h"
#include "worker/training/input/input_options.h"
#include "worker/training/train_config.h"

namespace pstrain {
namespace worker {

struct RoleSetup {
  explicit RoleSetup(ConfigNode c) : config(std::move(c)) {}
  ConfigNode config;
  std::unique_ptr<Model> model;  // its variables initialised from the config's seed
  TrainConfig train;
  // A click model (the config has `tables:`, worker/training/click_data.h) reads its click log
  // by feature name; an image model the input pipeline's `input` (read into `input`).
  bool clicks = false;
  InputOptions input;
  int64_t max_steps = 0;
  int64_t steps_per_epoch = 1;
  // --elastic_data without a step limit: training ends when the data ledger's epochs are used
  // (max_steps is then only the progress lines' estimate: partial batches add steps).
  bool until_data_ends = false;
};

// Reads --config (and --data_dir, --max_steps, --epochs, --elastic_data) as a role does. A click
// model trains on the CPU only: --device=gpu, --intra_node_sync, --elastic_data and
// --synthetic_step_ms are refused for it, naming the flag.
Result<RoleSetup> LoadRoleSetup(const RoleOptions& options);

}  // namespace worker
}  // namespace pstrain
