// bfloat16 rounding (common/bfloat16.h): to nearest, ties to even, on every kind of float,
// against a reference that picks the nearer of the two neighbouring bfloat16s in double.
#include "common/bfloat16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace pstrain {
namespace {

uint32_t Bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof(b));
  return b;
}

float FromBits(uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof(x));
  return x;
}

// The bfloat16 nearest to finite `x`, worked out from its two neighbours: the truncation and the
// next one away from zero (which may be Inf); a tie goes to the one with an even last bit.
uint16_t NearestBfloat16(float x) {
  const uint16_t down = static_cast<uint16_t>(Bits(x) >> 16);
  const uint16_t up = static_cast<uint16_t>(down + 1);
  const double below = std::fabs(static_cast<double>(x) - Bfloat16ToFloat(down));
  // The neighbour past the largest finite bfloat16 stands for 2^128, where Inf begins.
  const double up_value = (up & 0x7fff) == 0x7f80 ? std::copysign(std::ldexp(1.0, 128), x)
                                                  : static_cast<double>(Bfloat16ToFloat(up));
  const double above = std::fabs(up_value - static_cast<double>(x));
  if (below < above) return down;
  if (above < below) return up;
  return (down & 1) == 0 ? down : up;
}

TEST(Bfloat16Test, EveryBfloat16WidensAndRoundsBackToItself) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    ASSERT_EQ(FloatToBfloat16(Bfloat16ToFloat(h)), h) << std::hex << b;
  }
}

TEST(Bfloat16Test, HalfwayCasesRoundToTheEvenNeighbour) {
  // bfloat16 keeps 7 mantissa bits: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7.
  EXPECT_EQ(RoundToBfloat16(1.0f + std::ldexp(1.0f, -8)), 1.0f);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  EXPECT_EQ(RoundToBfloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(RoundToBfloat16(-(1.0f + std::ldexp(1.0f, -8))), -1.0f);
  // Just off halfway goes to the nearer one.
  EXPECT_EQ(RoundToBfloat16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)),
            1.0f + std::ldexp(1.0f, -7));
  EXPECT_EQ(RoundToBfloat16(1.0f + std::ldexp(1.0f, -8) - std::ldexp(1.0f, -20)), 1.0f);
}

TEST(Bfloat16Test, InfinitiesStayAndTheLargestFloatsRoundUpToInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(RoundToBfloat16(inf), inf);
  EXPECT_EQ(RoundToBfloat16(-inf), -inf);
  EXPECT_EQ(RoundToBfloat16(std::numeric_limits<float>::max()), inf);
  EXPECT_EQ(RoundToBfloat16(-std::numeric_limits<float>::max()), -inf);
  EXPECT_EQ(FloatToBfloat16(FromBits(0x7f7f0000)), 0x7f7f);  // the largest finite bfloat16
}

TEST(Bfloat16Test, NaNsStayNaNsWithTheirSign) {
  EXPECT_TRUE(std::isnan(RoundToBfloat16(std::numeric_limits<float>::quiet_NaN())));
  // Payloads only in the lower half: truncation alone would make them Inf.
  for (uint32_t bits : {0x7f800001u, 0x7f80ffffu, 0xff800001u, 0x7fffffffu, 0xffffffffu}) {
    const uint16_t h = FloatToBfloat16(FromBits(bits));
    EXPECT_TRUE(std::isnan(Bfloat16ToFloat(h))) << std::hex << bits << " -> " << h;
    EXPECT_EQ(h >> 15, bits >> 31) << std::hex << bits;
  }
}

TEST(Bfloat16Test, DenormalsRoundOnTheSameGrid) {
  const float smallest = std::numeric_limits<float>::denorm_min();  // 2^-149
  EXPECT_EQ(Bits(RoundToBfloat16(smallest)), 0u);                   // below half of 2^-133
  EXPECT_EQ(Bits(RoundToBfloat16(-smallest)), 0x80000000u);         // -0 keeps its sign
  EXPECT_EQ(RoundToBfloat16(std::ldexp(1.0f, -133)), std::ldexp(1.0f, -133));  // bf16's smallest
  EXPECT_EQ(RoundToBfloat16(std::ldexp(1.0f, -134) + std::ldexp(1.0f, -140)),
            std::ldexp(1.0f, -133));
  // The largest denormal rounds up into the smallest normal float.
  EXPECT_EQ(RoundToBfloat16(FromBits(0x007fffffu)), std::numeric_limits<float>::min());
}

TEST(Bfloat16Test, RandomFloatsRoundToTheNearestBfloat16) {
  std::mt19937 rng(27);
  for (int i = 0; i < 1000000; ++i) {
    const float x = FromBits(rng());
    if (!std::isfinite(x)) continue;  // the tests above
    ASSERT_EQ(FloatToBfloat16(x), NearestBfloat16(x)) << std::hex << Bits(x);
  }
}

TEST(Bfloat16Test, ArraysConvertElementByElement) {
  const float in[] = {1.5f, -2.25f, 3.14159265f, 0.0f};
  uint16_t half[4];
  float out[4];
  FloatsToBfloat16(in, 4, half);
  Bfloat16ToFloats(half, 4, out);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], RoundToBfloat16(in[i])) << i;
  EXPECT_EQ(out[2], 3.140625f);
}

}  // namespace
}  // namespace pstrain
