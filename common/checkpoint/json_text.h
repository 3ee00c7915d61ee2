// The JSON header of a checkpoint file (ours, or a safetensors export) as text. nlohmann's
// dump throws on a string that is not UTF-8, and tensor names and metadata come from configs
// and users, so that is an error value naming the file rather than an exception.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace pstrain {

// `file` names the file in the error ("checkpoint 'runs/ckpt-100'").
inline Result<std::string> JsonText(const nlohmann::json& header, const std::string& file) {
  try {
    return header.dump();
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(file + ": tensor names and metadata must be UTF-8: " + e.what());
  }
}

}  // namespace pstrain
