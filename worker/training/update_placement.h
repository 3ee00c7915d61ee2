// Where the single-process trainer runs its optimizer. On a GPU, beside the model
// (worker/network/device_update.h): no gradients to the host, no values back, every step. On the
// host (ps::VariableStore, as a parameter server applies it) when the model computes on the CPU
// or the run needs something only the host does: clipping, weight decay, a click model's tables,
// an optimizer without GPU kernels (FTRL).
#pragma once

#include <memory>
#include <string>

#include "ps/variable_store.h"
#include "worker/network/device_placement.h"
#include "worker/network/device_update.h"
#include "worker/network/model.h"
#include "worker/training/train_config.h"

namespace pstrain {
namespace worker {

// Why a run on the GPU keeps its update on the host, or empty when it can run on the GPU.
// `tables`: the model has sparse tables (a click model).
std::string HostOnlyReason(const TrainConfig& train, const ps::OptimizerRule& rule, bool tables);

// On a GPU device with no HostOnlyReason: the update of `model`'s trainable variables on the GPU,
// its slots starting from (and DownloadState writing back into) `store`'s, and the model told
// to leave its variables and gradients on the device. Otherwise null: the store updates on the
// host. Either way the choice is logged, naming the reason for the host.
Result<std::unique_ptr<DeviceUpdate>> PlaceUpdate(const TrainConfig& train, bool tables,
                                                  const ComputeDevice& device,
                                                  ps::VariableStore* store, Model* model);

}  // namespace worker
}  // namespace pstrain
