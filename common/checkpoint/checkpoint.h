// One checkpoint file: named float32 tensors, the global step and a string metadata map.
//
// Layout (all integers little-endian):
//   preamble  "PSTCKPT\0", u32 version (1), u32 masked CRC-32C of the header, u64 header bytes
//   header    JSON {"global_step", "metadata": {..}, "data_bytes",
//             "tensors": [{"name", "shape", "offset", "bytes"}, ..]}; offsets from data start
//   data      starts at the first multiple of 64 after the header; each tensor's raw floats
//             start 64-byte aligned, zero padding between them
//   footer    u64 bytes before the footer, u32 masked CRC-32C of all of them, "PEND"
// Reading checks magic, version, header CRC, sizes against the file size and the whole-file
// CRC before it returns anything; any failure is DataLoss naming the file.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "common/status.h"
#include "common/tensor.h"

namespace pstrain {

struct CheckpointData {
  int64_t global_step = 0;
  // Variables, optimizer slots ("conv1/weights/Adam_m"), batch-norm moving statistics.
  std::map<std::string, Tensor> tensors;
  // Free-form strings: model name, config hash, ...
  std::map<std::string, std::string> metadata;
};

// Writes atomically: a reader sees either the previous file at `path` or the complete new one.
Status WriteCheckpoint(const std::string& path, const CheckpointData& data);

// NotFound if `path` does not exist; DataLoss naming `path` and the failed check when the file
// is corrupt, truncated or not a checkpoint.
Result<CheckpointData> ReadCheckpoint(const std::string& path);

}  // namespace pstrain
