// CRC-32C (Castagnoli), as TFRecord, TensorBoard event files and our checkpoints use it.
// Written here because Debian 12 packages no CRC-32C library (Google's crc32c is not
// packaged and bookworm's Abseil predates absl/crc).
#pragma once

#include <cstddef>
#include <cstdint>

namespace pstrain {
namespace crc32c {

// CRC of data[0, n) continuing from `init` (the CRC of the preceding bytes).
uint32_t Extend(uint32_t init, const void* data, size_t n);
inline uint32_t Value(const void* data, size_t n) { return Extend(0, data, n); }

// TFRecord's masking, so that a CRC stored next to the data it covers stays well mixed.
inline uint32_t Mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t Unmask(uint32_t masked) {
  uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace crc32c
}  // namespace pstrain
