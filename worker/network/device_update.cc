#include "worker/network/device_update.h"

namespace pstrain {
namespace worker {

Status DeviceUpdateSupports(const ps::OptimizerRule& rule) {
  for (const char* type : {"sgd", "momentum", "adam", "adagrad", "rmsprop"}) {
    if (rule.type == type) return Status::OK();
  }
  return FailedPrecondition(
      "the " + rule.type +
      " optimizer has no GPU kernels (sgd, momentum, adam, adagrad and rmsprop "
      "have)");
}

}  // namespace worker
}  // namespace pstrain
