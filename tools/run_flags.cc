#include "tools/run_flags.h"

#include <gflags/gflags.h>

DEFINE_int64(max_steps, 0, "stop at this global step (0: the config's max_steps or epochs)");
DEFINE_int64(epochs, 0, "epochs to train (0: the config's train.epochs)");
DEFINE_int64(log_every_n_steps, 100,
             "local steps between progress lines (pstrain-train: and scalar summaries)");
DEFINE_int64(histogram_every_n_steps, 500,
             "local steps between variable/gradient histograms (in a cluster, the chief's)");
DEFINE_int64(save_checkpoints_steps, 0,
             "checkpoint every N global steps (0: by time only; in a cluster, the chief)");
DEFINE_double(save_checkpoints_secs, 60,
              "checkpoint every N seconds (0: by steps only; in a cluster, the chief)");
