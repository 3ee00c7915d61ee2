#include "ps/push_contents.h"

#include <algorithm>
#include <set>

namespace pstrain {
namespace ps {

Result<PushContents> PushKinds::Check(const VariableStore& store, const wire::Message& push) {
  PushContents c;
  std::set<std::string> named;
  for (const auto& t : push.tensors) {
    uint32_t exponent = 0;
    RETURN_IF_ERROR(store.CheckGradient(t.name, t.tensor, &exponent));
    const bool assign =
        std::find(push.assigns.begin(), push.assigns.end(), t.name) != push.assigns.end();
    if (!named.insert(t.name).second) {
      return InvalidArgument("the push names variable '" + t.name + "' twice");
    }
    if (auto kind = assigned_.find(t.name); kind != assigned_.end() && kind->second != assign) {
      return InvalidArgument("variable '" + t.name + "' was pushed as " +
                             (kind->second ? "a value to assign" : "a gradient") +
                             " before; this push sends it as " +
                             (assign ? "a value to assign" : "a gradient"));
    }
    (assign ? c.assigns : c.gradients).emplace_back(t.name, t.tensor);
    if (!assign) c.largest_exponent = std::max(c.largest_exponent, exponent);
  }
  for (const auto& [name, t] : c.gradients) assigned_.emplace(name, false);
  for (const auto& [name, t] : c.assigns) assigned_.emplace(name, true);
  return c;
}

Status CheckPushHeader(const wire::Message& request, uint64_t last_applied, bool takes_parts,
                       const std::string& policy, const std::string& who) {
  // Steps beyond 2^53 are not exact in the learning-rate schedule's double arithmetic.
  constexpr int64_t kMaxStep = int64_t{1} << 53;
  if (request.incarnation == 0 || request.sequence == 0) {
    return InvalidArgument(
        "a push must carry its sender's incarnation and sequence number "
        "(both > 0; got " +
        std::to_string(request.incarnation) + " and " + std::to_string(request.sequence) + ")");
  }
  if (request.tensors.empty()) return InvalidArgument("a push without gradients");
  // Parts of one step (value: parts still to come) are applied as they come: async only, since
  // accumulation and sync count whole pushes.
  if (request.value < 0 || request.value > kMaxPushParts) {
    return InvalidArgument("a push says " + std::to_string(request.value) +
                           " parts of its step are still to come; expected 0 to " +
                           std::to_string(kMaxPushParts));
  }
  if (request.value > 0 && !takes_parts) {
    return InvalidArgument(
        "a push in parts (" + std::to_string(request.value) +
        " more to come) needs --update_mode=async, and this server runs " + policy +
        ": give workers the servers' --update_mode (they then push whole steps) or "
        "--overlap_push=false");
  }
  if (request.step < 0 || request.step > kMaxStep) {
    return InvalidArgument("push computed from step " + std::to_string(request.step) +
                           "; steps are from 0 to 2^53");
  }
  if (last_applied != 0 && request.sequence > last_applied + 1) {
    // The last applied number is not told: a sender that is not that process would learn it.
    return InvalidArgument("push " + std::to_string(request.sequence) + " from " + who +
                           " skips ahead of the last one applied (expected the next, or a retry)");
  }
  return Status::OK();
}

}  // namespace ps
}  // namespace pstrain
