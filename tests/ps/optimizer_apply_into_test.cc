// Optimizer::ApplyInto writes an update to another buffer (what the server does while a pull
// reply still holds the variable's): it must leave exactly the bytes Apply leaves in place, for
// every optimizer, on the scalar and the vectorised/threaded paths, and not touch the input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "ps/optimizer.h"
#include "tests/ps/optimizer_test_util.h"

namespace pstrain::ps {
namespace {

constexpr float kLr = 0.01f;

Tensor Wave(int64_t n, float freq) {
  Tensor t(Shape{n});
  for (int64_t i = 0; i < n; ++i) t[i] = std::sin(freq * static_cast<float>(i) + 0.3f);
  return t;
}

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

class ApplyIntoTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ApplyIntoTest, LeavesTheBitsApplyLeavesInPlaceAndTheInputAsItWas) {
  // 5: the scalar path; (1 << 16) + 3: the threaded, vectorised path with a ragged tail.
  for (int64_t n : {int64_t{5}, (int64_t{1} << 16) + 3}) {
    auto optimizer = MustOptimizer(GetParam());
    Tensor in_place = Wave(n, 0.001f);
    Slots in_place_slots = optimizer->CreateSlots(in_place.shape());
    Tensor current = in_place.Clone();
    Slots slots = optimizer->CreateSlots(current.shape());
    Tensor other(Shape{n});  // the second buffer; the two are swapped after each update
    for (int64_t step = 0; step < 3; ++step) {
      const Tensor grad = Wave(n, 0.0007f * static_cast<float>(step + 1));
      ASSERT_TRUE(optimizer->Apply(kLr, step, grad, &in_place, &in_place_slots).ok());
      const Tensor before = current.Clone();
      ASSERT_TRUE(optimizer->ApplyInto(kLr, step, grad, current, &other, &slots).ok());
      EXPECT_TRUE(SameBits(current, before)) << GetParam() << ": the input changed, n " << n;
      EXPECT_TRUE(SameBits(other, in_place)) << GetParam() << " step " << step << ", n " << n;
      for (const auto& [name, slot] : in_place_slots) {
        EXPECT_TRUE(SameBits(slots.at(name), slot)) << GetParam() << " slot " << name;
      }
      std::swap(current, other);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllOptimizers, ApplyIntoTest, ::testing::ValuesIn(AllOptimizerConfigs()));

TEST(ApplyIntoErrorsTest, AnOutputThatOverlapsTheVariableWithoutBeingItIsRefused) {
  auto sgd = MustOptimizer("{type: sgd}");
  Tensor buffer = Tensor::Filled(Shape{8}, 1.0f);
  const Tensor var = buffer.Reshaped(Shape{8});
  Tensor same = Tensor::Wrap(Shape{8}, buffer.data(), nullptr);
  Slots slots;
  ASSERT_TRUE(sgd->ApplyInto(kLr, 0, Tensor::Filled(Shape{8}, 1.0f), var, &same, &slots).ok())
      << "the same buffer is an update in place";
  EXPECT_FLOAT_EQ(buffer[0], 1.0f - kLr);
  Tensor big = Tensor::Filled(Shape{16}, 1.0f);
  const Tensor low = Tensor::Wrap(Shape{8}, big.data(), nullptr);
  Tensor high = Tensor::Wrap(Shape{8}, big.data() + 4, nullptr);
  Status s = sgd->ApplyInto(kLr, 0, Tensor::Filled(Shape{8}, 1.0f), low, &high, &slots);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("overlaps"), std::string::npos) << s.ToString();
  EXPECT_EQ(big[12], 1.0f) << "nothing written";
}

TEST(ApplyIntoErrorsTest, AnOutputOfAnotherShapeIsRefusedNamingBoth) {
  auto adam = MustOptimizer("{type: adam}");
  const Tensor var = Tensor::Filled(Shape{2, 3}, 1.0f);
  Slots slots = adam->CreateSlots(var.shape());
  Tensor out(Shape{3, 2});
  Status s = adam->ApplyInto(kLr, 0, Tensor::Filled(Shape{2, 3}, 1.0f), var, &out, &slots);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("[3,2]"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("[2,3]"), std::string::npos) << s.ToString();
  EXPECT_EQ(slots.at("m")[0], 0.0f) << "nothing updated";
}

}  // namespace
}  // namespace pstrain::ps
