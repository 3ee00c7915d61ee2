// What a push carries, checked whole before anything changes: each tensor against its variable
// (shape, NaN/Inf, the optimizer's bound: VariableStore::CheckGradient), each variable named once,
// and each pushed as the kind it was pushed as before: a gradient, or a value to assign (batch-norm
// moving statistics, named in the push's `assigns`). A record tells its backups which is which by
// name, so a variable never changes kind.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "common/status.h"
#include "common/wire/message.h"
#include "ps/variable_store.h"

namespace pstrain {
namespace ps {

struct PushContents {
  VariableStore::NamedTensors gradients;
  VariableStore::NamedTensors assigns;
  uint32_t largest_exponent = 0;  // the gradients' largest float exponent (0: all zero)
};

class PushKinds {
 public:
  // The push's tensors split into gradients and values, or why it is refused (nothing noted).
  // Once checked, its variables' kinds are noted for later pushes.
  Result<PushContents> Check(const VariableStore& store, const wire::Message& push);

 private:
  std::map<std::string, bool> assigned_;  // by variable: pushed as a value (true) or a gradient
};

}  // namespace ps
}  // namespace pstrain
