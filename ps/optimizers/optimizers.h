// Inside ps/: the checks and config readers the optimizers share (each registers itself).
#pragma once

#include <memory>
#include <string>

#include "common/config.h"
#include "common/status.h"
#include "ps/optimizer.h"

namespace pstrain::ps::internal {

// "field 'beta1' must be in [0, 1), got 1.5" style errors; NaN always fails.
Status CheckInUnitInterval(const char* field, double value);  // [0, 1)
Status CheckNonNegative(const char* field, double value);
Status CheckPositive(const char* field, double value);
Status CheckNonPositive(const char* field, double value);  // <= 0

// What an optimizer's float field must satisfy: one of the checks above.
enum class Bound { kUnitInterval, kNonNegative, kPositive, kNonPositive };
Status CheckBound(const char* field, double value, Bound bound);

// An optional float field: the default when absent, an error naming it when malformed.
Result<float> GetFloat(const ConfigNode& node, const std::string& key, float fallback);

// Returns `status` re-rooted at `node` so the message also names the file and path.
Status AtNode(const ConfigNode& node, const Status& status);

}  // namespace pstrain::ps::internal
