// The flags of how long a run trains and how often it reports and saves, defined once for both
// binaries that train (pstrain-train, and pstrain's worker roles, whose options name the same
// fields): --max_steps, --epochs, --log_every_n_steps, --histogram_every_n_steps,
// --save_checkpoints_steps, --save_checkpoints_secs. --log_every_n_secs and --max_to_keep stay
// with each binary: their defaults and meanings differ.
#pragma once

#include <gflags/gflags_declare.h>

#include <algorithm>
#include <cstdint>

DECLARE_int64(max_steps);
DECLARE_int64(epochs);
DECLARE_int64(log_every_n_steps);
DECLARE_int64(histogram_every_n_steps);
DECLARE_int64(save_checkpoints_steps);
DECLARE_double(save_checkpoints_secs);

namespace pstrain {
namespace worker {

// Sets those fields of `o` (a TrainOptions or a RoleOptions) from the flags.
template <typename Options>
void SetRunScheduleFromFlags(Options* o) {
  o->max_steps = FLAGS_max_steps;
  o->epochs = FLAGS_epochs;
  o->log_every_n_steps = std::max<int64_t>(1, FLAGS_log_every_n_steps);
  o->histogram_every_n_steps = FLAGS_histogram_every_n_steps;
  o->save_checkpoints_steps = FLAGS_save_checkpoints_steps;
  o->save_checkpoints_secs = FLAGS_save_checkpoints_secs;
}

}  // namespace worker
}  // namespace pstrain
