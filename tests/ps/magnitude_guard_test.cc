// The outlier guard (ps/magnitude_guard.h): nothing during warm-up or when off; past it, a push
// whose largest element lies more than the bound above its sender's median (or the senders'
// median) is scaled by the exact power of two that brings it to the bound; a few outliers do not
// move the median, and one sender cannot drag another's bound down.
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
    EXPECT_EQ(guard.Scale("w0", i == 3 ? Exp(40) : Exp(-7)), 1.0f)
        << "scaled during warm-up, push " << i;
  }
  EXPECT_EQ(guard.Bound("w0"), Exp(3)) << "the median 2^-7, ten binades up";
  EXPECT_EQ(guard.Scale("w0", Exp(3)), 1.0f) << "at the bound: taken as it is";
  EXPECT_EQ(guard.Scale("w0", Exp(20)), std::ldexp(1.0f, -17));
  EXPECT_EQ(guard.scaled(), 1);
  // Outliers, even many of them, leave the median where the ordinary pushes put it.
  for (int i = 0; i < 20; ++i) EXPECT_LT(guard.Scale("w0", Exp(60)), 1.0f);
  EXPECT_EQ(guard.Bound("w0"), Exp(3));
  EXPECT_EQ(guard.scaled(), 21);
  // Gradients that shrink over a run move the bound down with them.
  for (size_t i = 0; i < MagnitudeGuard::kWindow; ++i) guard.Scale("w0", Exp(-12));
  EXPECT_EQ(guard.Bound("w0"), Exp(-2));
}

TEST(MagnitudeGuardTest, ANewSenderIsBoundByTheOthersFromItsFirstPush) {
  MagnitudeGuard guard(10);
  for (size_t i = 0; i < MagnitudeGuard::kWarmup; ++i) guard.Scale("w0", Exp(-7));
  EXPECT_EQ(guard.Bound("w1"), Exp(3));
  EXPECT_EQ(guard.Scale("w1", Exp(100)), std::ldexp(1.0f, -97));
}

TEST(MagnitudeGuardTest, TinyPushesOfOneSenderDoNotDragAnotherSendersBoundDown) {
  MagnitudeGuard guard(10);
  for (size_t i = 0; i < MagnitudeGuard::kWindow; ++i) {
    guard.Scale("honest", Exp(-7));
    guard.Scale("dragger", Exp(-100));
  }
  EXPECT_EQ(guard.Bound("honest"), Exp(3)) << "its own median, whatever the other pushes";
  EXPECT_EQ(guard.Scale("honest", Exp(2)), 1.0f);
  EXPECT_EQ(guard.Bound("dragger"), Exp(-90));
  EXPECT_EQ(guard.scaled(), 0);
}

TEST(MagnitudeGuardTest, AllZeroPushesAreNotRecorded) {
  MagnitudeGuard guard(10);
  for (size_t i = 0; i < MagnitudeGuard::kWarmup; ++i) guard.Scale("w0", Exp(-7));
  for (size_t i = 0; i < 3 * MagnitudeGuard::kWindow; ++i) {
    EXPECT_EQ(guard.Scale("w0", 0), 1.0f);
  }
  EXPECT_EQ(guard.Bound("w0"), Exp(3)) << "zeros say nothing of magnitude";
}

TEST(MagnitudeGuardTest, WithThreeSendersOneCannotLiftItsOwnBoundByPushingEverLarger) {
  MagnitudeGuard guard(10);
  for (size_t i = 0; i < MagnitudeGuard::kWarmup; ++i) {
    guard.Scale("a", Exp(-7));
    guard.Scale("b", Exp(-6));
    guard.Scale("c", Exp(-7));
  }
  // "c" pushes at 2^100 again and again: each push is scaled to the bound, recorded there, and
  // the median over senders stays the others'.
  for (size_t i = 0; i < 4 * MagnitudeGuard::kWindow; ++i) {
    EXPECT_LT(guard.Scale("c", Exp(100)), 1.0f);
    guard.Scale("a", Exp(-7));
    guard.Scale("b", Exp(-6));
  }
  EXPECT_EQ(guard.Bound("c"), Exp(4)) << "the upper median of (-7, -6, c's) is -6: ten up";
  EXPECT_EQ(guard.Bound("a"), Exp(3));
}

TEST(MagnitudeGuardTest, OffScalesNothing) {
  MagnitudeGuard off(0);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(off.Scale("w0", i % 2 ? Exp(-7) : Exp(100)), 1.0f);
  EXPECT_EQ(off.Bound("w0"), 0u);
  EXPECT_EQ(off.scaled(), 0);
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
