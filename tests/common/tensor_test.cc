#include "common/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace pstrain {
namespace {

TEST(TensorTest, NewTensorIsZeroAndAligned) {
  Tensor t(Shape{3, 5});
  EXPECT_EQ(t.size(), 15);
  EXPECT_EQ(t.bytes(), 60u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);
  for (int64_t i = 0; i < t.size(); ++i) EXPECT_EQ(t[i], 0.0f);
}

TEST(TensorTest, CopiesShareTheBufferAndCloneDoesNot) {
  Tensor a = Tensor::Filled(Shape{4}, 1.0f);
  Tensor shared = a;
  Tensor deep = a.Clone();
  a[2] = 7.0f;
  EXPECT_EQ(shared[2], 7.0f);
  EXPECT_EQ(deep[2], 1.0f);
}

TEST(TensorTest, ReshapeKeepsDataAndChecksCount) {
  Tensor a = Tensor::FromVector(Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = a.Reshaped(Shape{3, 2});
  EXPECT_EQ(b.shape(), (Shape{3, 2}));
  EXPECT_EQ(b[5], 6.0f);
  EXPECT_DEATH(a.Reshaped(Shape{4, 2}), "cannot reshape");
}

TEST(TensorTest, WrapRunsReleaseWhenLastCopyGoes) {
  static float storage[4] = {1, 2, 3, 4};
  int released = 0;
  {
    Tensor w = Tensor::Wrap(Shape{4}, storage, [&] { ++released; });
    Tensor copy = w;
    EXPECT_EQ(copy[3], 4.0f);
  }
  EXPECT_EQ(released, 1);
}

TEST(ShapeTest, BatchHelpersAndToString) {
  Shape s{128, 1, 28, 28};
  EXPECT_EQ(s.num_elements(), 128 * 28 * 28);
  EXPECT_EQ(s.WithBatch(4).ToString(), "[4,1,28,28]");
  EXPECT_EQ(s.WithoutBatch(), (Shape{1, 28, 28}));
  EXPECT_EQ(Shape{}.num_elements(), 1);
}

}  // namespace
}  // namespace pstrain

namespace pstrain {
namespace {
TEST(TensorTest, DefaultTensorIsEmptyWithNoElements) {
  Tensor t;
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.size(), 0);
  EXPECT_EQ(t.bytes(), 0u);
  Tensor big(Shape{1 << 20});
  big[(1 << 20) - 1] = 1.0f;  // the whole buffer is there
  EXPECT_EQ(big.size(), 1 << 20);
}
}  // namespace
}  // namespace pstrain
