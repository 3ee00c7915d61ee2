#include "ps/update_mode.h"

#include "common/enum_names.h"

namespace pstrain {
namespace ps {

Result<UpdateMode> ParseUpdateMode(const std::string& name) {
  static constexpr EnumName<UpdateMode> kModes[] = {{UpdateMode::kAsync, "async"},
                                                    {UpdateMode::kAccumulate, "accumulate"},
                                                    {UpdateMode::kSync, "sync"}};
  return ValueNamed(kModes, name, "--update_mode");
}

}  // namespace ps
}  // namespace pstrain
