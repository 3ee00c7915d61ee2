// The TensorFlow layout of a model's checkpoint beyond names and kernel layouts
// (common/checkpoint/tf_checkpoint.h TfLayout): which dense kernels read a flattened feature map,
// and its [C, H, W]. Derived from the model config's layers and shapes (DescribeModel), so it
// lives beside the trainer, not in common/.
#pragma once

#include "common/checkpoint/tf_checkpoint.h"
#include "common/config.h"
#include "common/status.h"

namespace pstrain {

// A fully_connected layer whose input is a flatten of a [C, H, W] with H*W > 1 (a feature map,
// not already a vector) maps its "<layer>/weights" to that shape. Errors as DescribeModel's.
Result<TfLayout> TfLayoutOf(const ConfigNode& model_node);
// The same for a train config file (its "model:").
Result<TfLayout> TfLayoutOfConfigFile(const std::string& config_path);
// What writing a run's checkpoints for TensorFlow takes from its config file: Adam's betas
// (TfExportOptionsFromConfig) and the layout.
Result<TfExportOptions> TfExportOptionsOfConfigFile(const std::string& config_path);

}  // namespace pstrain
