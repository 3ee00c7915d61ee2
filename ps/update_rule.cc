#include "ps/update_rule.h"

#include <utility>

namespace pstrain::ps {

Result<UpdateRule> ReadUpdateRule(const ConfigNode& section) {
  ASSIGN_OR_RETURN(ConfigNode optimizer_node, section.Child("optimizer"));
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer, Optimizer::FromConfig(optimizer_node));
  ASSIGN_OR_RETURN(ConfigNode lr_node, section.Child("learning_rate"));
  ASSIGN_OR_RETURN(LearningRateSchedule learning_rate, LearningRateSchedule::FromConfig(lr_node));
  ClippingOptions clipping;
  if (section.Has("clipping")) {
    ASSIGN_OR_RETURN(ConfigNode clipping_node, section.Child("clipping"));
    ASSIGN_OR_RETURN(clipping, ClippingOptions::FromConfig(clipping_node));
  }
  return UpdateRule{std::move(optimizer), std::move(learning_rate), clipping};
}

}  // namespace pstrain::ps
