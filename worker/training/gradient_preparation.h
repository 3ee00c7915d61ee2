// What a worker does to its gradients before they leave it: weight decay, and the worker's side
// of clipping (by global norm; ps::ClippingOptions::WorkerSide).
#pragma once

#include "worker/network/model.h"
#include "worker/training/train_config.h"

namespace pstrain {
namespace worker {

// Adds weight decay to the weights' gradients (not biases or batch norm) and clips by global
// norm when the config asks for it: the worker's share of gradient processing.
void PrepareGradients(const TrainConfig& config, Model* model);
// The weight decay of one variable's gradient (PrepareGradients' first half), for a worker that
// pushes each layer as backward finishes it.
void AddWeightDecay(const TrainConfig& config, Variable* v);

}  // namespace worker
}  // namespace pstrain
