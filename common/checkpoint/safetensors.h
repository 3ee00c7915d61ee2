// Export to the safetensors format (huggingface/safetensors), which numpy and PyTorch users
// load directly: u64 little-endian header length, a JSON header mapping each tensor name to
// {"dtype": "F32", "shape", "data_offsets": [begin, end]} plus a "__metadata__" string map,
// then the tensors' bytes back to back. Names are kept as they are ("conv1/weights").
#pragma once

#include <string>

#include "common/checkpoint/checkpoint.h"
#include "common/status.h"

namespace pstrain {

// Written atomically. "__metadata__" holds the checkpoint's metadata plus "global_step"
// (which wins over a metadata entry of that name).
Status ExportSafetensors(const CheckpointData& data, const std::string& path);

}  // namespace pstrain
