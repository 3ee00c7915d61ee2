// The update rule of a config section: its optimizer, learning-rate schedule and (optional)
// clipping. Dense variables (`train:`, variable_store.h) and embedding tables (`tables:`,
// sparse_tables_config.h) name theirs with the same three fields, read here once.
#pragma once

#include <memory>

#include "common/config.h"
#include "common/status.h"
#include "ps/clipping.h"
#include "ps/learning_rate.h"
#include "ps/optimizer.h"

namespace pstrain::ps {

struct UpdateRule {
  std::unique_ptr<Optimizer> optimizer;
  LearningRateSchedule learning_rate;
  ClippingOptions clipping;  // none unless the section has `clipping:`
};

// Reads `optimizer` and `learning_rate` (both required) and `clipping` from `section`; errors
// name the field. Other keys are the caller's to check.
Result<UpdateRule> ReadUpdateRule(const ConfigNode& section);

}  // namespace pstrain::ps
