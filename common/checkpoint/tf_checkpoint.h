// pstrain's checkpoints as TensorFlow 1 names and lays out the same model's variables (the graph
// of tests/checkpoint/tf_refnet.py: get_variable("conv1/weights"), AdamOptimizer), written to
// and read from TensorFlow's tensor bundle (tf_bundle.h):
//   variables      the same names: "conv1/weights", "fc1/bias", "bn1/moving_mean"
//   layouts        a rank-4 kernel, pstrain's [out, in, kh, kw] (conv2d_transpose: [in, out, kh,
//                  kw]), is TF's HWIO [kh, kw, in, out] ([kh, kw, out, in]); a rank-2 dense
//                  kernel, pstrain's [units, features], is TF's [features, units]. Every rank-4
//                  tensor is permuted and every rank-2 one transposed, slots with their variables.
//   slots          tf.compat.v1.train's slot names: Adam "<var>/m", "<var>/v" are "<var>/Adam",
//                  "<var>/Adam_1"; Momentum "<var>/Momentum"; Adagrad "<var>/Adagrad"; RMSProp
//                  "ms", "mom" are "RMSProp", "RMSProp_1" (centered: "mg", "ms", "mom" are
//                  "RMSProp", "RMSProp_1", "RMSProp_2")
//   global_step    an int64 scalar
//   beta1_power, beta2_power   with Adam slots: beta^(global_step + 1), the values TF's Adam holds
//                  after global_step updates, since a TF-1 Saver restores every variable of its
//                  graph; dropped on reading (pstrain's Adam takes them from the global step)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/checkpoint/checkpoint.h"
#include "common/status.h"

namespace pstrain {

// What the model adds to the layouts above: the dense kernels that read a flattened feature map.
// pstrain flattens [C, H, W] and TensorFlow's NHWC graph [H, W, C], so the same kernel's rows
// come in another order there: its rows (and its slots') are permuted between the two, given the
// map's [C, H, W] (worker/training/tf_layout.h derives it from a model config). Without it a
// TensorFlow graph restores the values but computes another function.
struct TfLayout {
  std::map<std::string, std::vector<int64_t>> flattened_inputs;  // "fc1/weights" -> [64, 7, 7]
};

struct TfExportOptions {
  // The Adam betas for beta1_power and beta2_power (TF's defaults; the config's
  // train.optimizer.beta1/beta2 when it sets them).
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  TfLayout layout;
};

// The betas of `config_path`'s train.optimizer when it is Adam (TF's defaults for what it leaves
// out); TF's defaults for another optimizer. Errors name the file and the field.
Result<TfExportOptions> TfExportOptionsFromConfig(const std::string& config_path);

// Writes `data` as the bundle <prefix>.index + <prefix>.data-00000-of-00001.
Status WriteTfCheckpoint(const std::string& prefix, const CheckpointData& data,
                         const TfExportOptions& options = {});

// The bundle at `prefix` in pstrain's names and layouts (tensors of other types than float32 are
// left out with a warning naming them). Errors as ReadTfBundle's.
Result<CheckpointData> ReadTfCheckpoint(const std::string& prefix, const TfLayout& layout = {});

// Whether `data` was read from a TensorFlow bundle (ReadTfCheckpoint marks its metadata).
bool IsFromTfBundle(const CheckpointData& data);

// A pstrain tensor's shape as TensorFlow lays it out ([32,1,5,5] -> [5,5,1,32]).
Shape TfShape(const Shape& shape);

// What a checkpoint path may name: a TensorFlow bundle's prefix (<path>.index exists) or a
// pstrain checkpoint file.
Result<CheckpointData> ReadCheckpointOrTfBundle(const std::string& path,
                                                const TfLayout& layout = {});

}  // namespace pstrain
