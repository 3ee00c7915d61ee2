// Inside ps/: each optimizer's config reader (it registers itself) and the checks they share.
#pragma once

#include <memory>
#include <string>

#include "common/config.h"
#include "common/status.h"
#include "ps/optimizer.h"

namespace pstrain::ps::internal {

// Each reads its type's fields from the `optimizer:` node (CheckKeys included).
Result<std::unique_ptr<Optimizer>> SgdFromConfig(const ConfigNode& node);
Result<std::unique_ptr<Optimizer>> MomentumFromConfig(const ConfigNode& node);
Result<std::unique_ptr<Optimizer>> AdamFromConfig(const ConfigNode& node);
Result<std::unique_ptr<Optimizer>> AdagradFromConfig(const ConfigNode& node);
Result<std::unique_ptr<Optimizer>> RMSPropFromConfig(const ConfigNode& node);
Result<std::unique_ptr<Optimizer>> FtrlFromConfig(const ConfigNode& node);

// "field 'beta1' must be in [0, 1), got 1.5" style errors; NaN always fails.
Status CheckInUnitInterval(const char* field, double value);  // [0, 1)
Status CheckNonNegative(const char* field, double value);
Status CheckPositive(const char* field, double value);

// An optional float field: the default when absent, an error naming it when malformed.
Result<float> GetFloat(const ConfigNode& node, const std::string& key, float fallback);

// Returns `status` re-rooted at `node` so the message also names the file and path.
Status AtNode(const ConfigNode& node, const Status& status);

}  // namespace pstrain::ps::internal
