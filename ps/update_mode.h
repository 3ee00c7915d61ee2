// How a parameter server applies pushes (ps/server.h says what each mode does).
#pragma once

#include <string>

#include "common/status.h"

namespace pstrain {
namespace ps {

enum class UpdateMode { kAsync, kAccumulate, kSync };

Result<UpdateMode> ParseUpdateMode(const std::string& name);

}  // namespace ps
}  // namespace pstrain
