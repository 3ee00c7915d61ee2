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

}  // namespace ps
}  // namespace pstrain
