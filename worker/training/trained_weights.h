// The variables of a trained model, from wherever a run left them: a train_dir (the
// model.safetensors the chief exports at the end, else the latest checkpoint of its `checkpoint`
// index), one checkpoint file (PSTCKPT) or a safetensors file (ours or any with F32 tensors).
// For tools that take a model away from training (pstrain-export).
//
// The safetensors reader belongs beside ExportSafetensors in common/checkpoint/safetensors.h;
// it lives here until a second user needs it.
#pragma once

#include <map>
#include <string>

#include "common/status.h"
#include "common/tensor.h"

namespace pstrain {

// Tensors by name ("conv1/weights"; a checkpoint also holds optimizer slots, which callers
// ignore). Errors name the path and what is wrong with it (DataLoss for a malformed file).
Result<std::map<std::string, Tensor>> ReadTrainedWeights(const std::string& path);

// The F32 tensors of a safetensors file; another dtype is an error naming the tensor.
Result<std::map<std::string, Tensor>> ReadSafetensors(const std::string& path);

}  // namespace pstrain
