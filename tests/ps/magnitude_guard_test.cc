// The outlier guard (ps/magnitude_guard.h): nothing during warm-up or when off; past it, a push
// whose largest element lies more than the bound above the window's median is scaled by the exact
// power of two that brings it to the bound, and a few outliers do not move the median.
#include "ps/magnitude_guard.h"

#include <gtest/gtest.h>

#include <cmath>

namespace pstrain {
namespace ps {
namespace {

// The biased float exponent of 2^k.
uint32_t Exp(int k) { return static_cast<uint32_t>(127 + k); }

TEST(MagnitudeGuardTest, AnOutlierIsScaledToTheBoundByAPowerOfTwoAfterWarmUp) {
  MagnitudeGuard guard(10);
  for (size_t i = 0; i < MagnitudeGuard::kWarmup; ++i) {
    EXPECT_EQ(guard.Scale(i == 3 ? Exp(40) : Exp(-7)), 1.0f) << "scaled during warm-up, push " << i;
  }
  EXPECT_EQ(guard.Bound(), Exp(3)) << "the median 2^-7, ten binades up";
  EXPECT_EQ(guard.Scale(Exp(3)), 1.0f) << "at the bound: taken as it is";
  EXPECT_EQ(guard.Scale(Exp(20)), std::ldexp(1.0f, -17));
  EXPECT_EQ(guard.scaled(), 1);
  // Outliers, even many of them, leave the median where the ordinary pushes put it.
  for (int i = 0; i < 20; ++i) EXPECT_LT(guard.Scale(Exp(60)), 1.0f);
  EXPECT_EQ(guard.Bound(), Exp(3));
  EXPECT_EQ(guard.scaled(), 21);
  // Gradients that shrink over a run move the bound down with them.
  for (int i = 0; i < 256; ++i) guard.Scale(Exp(-12));
  EXPECT_EQ(guard.Bound(), Exp(-2));
}

TEST(MagnitudeGuardTest, OffScalesNothing) {
  MagnitudeGuard off(0);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(off.Scale(i % 2 ? Exp(-7) : Exp(100)), 1.0f);
  EXPECT_EQ(off.Bound(), 0u);
  EXPECT_EQ(off.scaled(), 0);
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
