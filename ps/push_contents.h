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

// What a push must carry before its tensors are looked at: its sender's incarnation and
// sequence, gradients, a step (0 to 2^53), parts to come (0 to kMaxPushParts; more than 0 only
// when `takes_parts`, the update policy named `policy`), and a sequence that does not skip ahead of
// `last_applied`, the sender's last push taken (0: none).
Status CheckPushHeader(const wire::Message& request, uint64_t last_applied, bool takes_parts,
                       const std::string& policy, const std::string& who);

// The most parts one step's push to one server may come in (PsClient cuts a model into buckets
// of a few MB; a 1 GiB model at 4 MB is 256).
constexpr int64_t kMaxPushParts = 4096;

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
