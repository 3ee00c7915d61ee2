// bfloat16: the upper half of an IEEE float32 (sign, the same 8-bit exponent, 7 mantissa bits),
// the format TensorFlow and PyTorch call bfloat16. Used where tensors travel in 16 bits
// (--push_dtype=bf16, common/wire/codec.cc): float32's range, so no loss scaling, and widening
// back is exact. Rounding is to nearest, ties to even, on the bits, denormals included (no
// flush to zero); NaN stays a NaN.
#pragma once

#include <cstdint>
#include <cstring>

namespace pstrain {

inline uint16_t FloatToBfloat16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    // Truncated, so that a NaN that came from a bfloat16 widens and rounds back to the same bits;
    // one whose payload lay only in the lower half gets a quiet bit, or it would read as Inf.
    const uint16_t high = static_cast<uint16_t>(bits >> 16);
    return (high & 0x7f) == 0 ? static_cast<uint16_t>(high | 0x40) : high;
  }
  // Adding 0x7fff plus the kept half's lowest bit rounds to nearest, a tie to the even one; a
  // carry moves into the exponent as it should (up to Inf for the largest finite floats).
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float Bfloat16ToFloat(uint16_t b) {
  const uint32_t bits = uint32_t{b} << 16;
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

// `x` rounded to the nearest bfloat16, as a float.
inline float RoundToBfloat16(float x) { return Bfloat16ToFloat(FloatToBfloat16(x)); }

inline void FloatsToBfloat16(const float* in, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToBfloat16(in[i]);
}

inline void Bfloat16ToFloats(const uint16_t* in, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = Bfloat16ToFloat(in[i]);
}

}  // namespace pstrain
