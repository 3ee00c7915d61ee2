// The device flags both binaries take (pstrain-train and pstrain's worker and evaluator roles),
// defined once: --device, --log_device_placement, --allow_soft_placement, --gpu_allow_growth,
// --gpu_memory_fraction.
#pragma once

#include "worker/network/device_placement.h"

namespace pstrain {
namespace worker {

DeviceOptions DeviceOptionsFromFlags();

}  // namespace worker
}  // namespace pstrain
