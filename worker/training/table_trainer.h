// One-process training of a model whose embedding layers read sparse tables (a click model such
// as Wide & Deep, configs/widedeep.yaml): the examples are click-log TFRecord files read by
// feature name, the dense variables are updated by ps::VariableStore as in trainer.h, and each
// embedding table gathers the batch's rows before the step and applies their gradients after it
// (embedding_tables.h). Evaluation reports accuracy, loss, ROC AUC and log loss on the test file.
// Train() hands a config with a `tables:` section here.
//
//   input:
//     train_tfrecord: data/ctr/train.tfrecord
//     test_tfrecord: data/ctr/test.tfrecord
//     label: label
//     features: [...]       # common/data/feature_example.h
#pragma once

#include "common/config.h"
#include "common/status.h"
#include "worker/training/trainer.h"

namespace pstrain {
namespace worker {

Result<TrainResult> TrainWithTables(const TrainerOptions& options, const ConfigNode& config);

}  // namespace worker
}  // namespace pstrain
