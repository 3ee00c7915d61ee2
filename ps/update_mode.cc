#include "ps/update_mode.h"

namespace pstrain {
namespace ps {

Result<UpdateMode> ParseUpdateMode(const std::string& name) {
  if (name == "async") return UpdateMode::kAsync;
  if (name == "accumulate") return UpdateMode::kAccumulate;
  if (name == "sync") return UpdateMode::kSync;
  return InvalidArgument("--update_mode must be async, accumulate or sync, got '" + name + "'");
}

}  // namespace ps
}  // namespace pstrain
