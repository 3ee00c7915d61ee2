#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tests/worker/gradient_checker.h"
#include "tests/worker/reference_ops.h"

namespace pstrain {
namespace worker {
namespace testing {
namespace {

// Values spaced well beyond the finite-difference step, so max pooling and ReLU have no kink
// between x - step and x + step.
Tensor DistinctValues(const Shape& shape, uint64_t seed) {
  Tensor t = Tensor::Uninitialized(shape);
  std::vector<int64_t> order(t.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  for (int64_t i = 0; i < t.size(); ++i) {
    t[i] = (static_cast<float>(order[i]) - t.size() / 2.0f) * 0.05f + 0.025f;
  }
  return t;
}

void ExpectNear(const Tensor& a, const Tensor& b, float tol) {
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], tol * std::max(1.0f, std::fabs(b[i]))) << "at " << i;
  }
}

Tensor RunForward(Layer* layer, const std::vector<Tensor>& inputs, const Shape& out_shape,
                  bool training = true) {
  std::vector<int64_t> dims{inputs[0].dim(0)};
  dims.insert(dims.end(), out_shape.dims().begin(), out_shape.dims().end());
  Tensor y = Tensor::Uninitialized(Shape(dims));
  std::mt19937_64 rng(1);
  LayerContext ctx{training, &rng, nullptr};
  std::vector<const Tensor*> in;
  for (auto& t : inputs) in.push_back(&t);
  layer->Forward(in, &y, ctx);
  return y;
}

TEST(WindowTest, MatchesTensorFlowOutputSizeAndPadding) {
  // SAME: out = ceil(in/stride), pad_needed = (out-1)*stride + window - in, top gets the half.
  Window1D w = ComputeWindow(7, 4, 2, Padding::kSame).value();
  EXPECT_EQ(w.out, 4);
  EXPECT_EQ(w.pad_before, 1);
  EXPECT_EQ(w.pad_after, 2);
  w = ComputeWindow(28, 5, 1, Padding::kSame).value();
  EXPECT_EQ(w.out, 28);
  EXPECT_EQ(w.pad_before, 2);
  EXPECT_EQ(w.pad_after, 2);
  // VALID: out = ceil((in - window + 1) / stride); leftover pixels are dropped.
  w = ComputeWindow(8, 3, 2, Padding::kValid).value();
  EXPECT_EQ(w.out, 3);
  EXPECT_EQ(w.pad_before + w.pad_after, 0);
  EXPECT_FALSE(ComputeWindow(2, 3, 1, Padding::kValid).ok());
}

TEST(Conv2DTest, SameStride2OnOddSizeMatchesReferenceAndNumericGradient) {
  Shape out;
  auto conv = MakeLayer("{type: conv2d, filters: 4, kernel: 4, stride: 2, padding: SAME}",
                        {Shape{3, 7, 7}}, &out);
  EXPECT_EQ(out, (Shape{4, 4, 4}));
  std::mt19937_64 rng(1);
  Tensor x = RandomTensor(Shape{2, 3, 7, 7}, &rng);
  conv->variables()[1].value.CopyFrom(RandomTensor(Shape{4}, &rng));
  Tensor y = RunForward(conv.get(), {x}, out);
  ExpectNear(
      y,
      ReferenceConv(x, conv->variables()[0].value, conv->variables()[1].value, 2, Padding::kSame),
      1e-4f);
  CheckGradients(conv.get(), {x}, out);
}

TEST(Conv2DTest, ValidWithLeftoverPixelsMatchesReferenceAndNumericGradient) {
  Shape out;
  auto conv = MakeLayer("{type: conv2d, filters: 3, kernel: 3, stride: 2, padding: VALID}",
                        {Shape{2, 8, 8}}, &out);
  EXPECT_EQ(out, (Shape{3, 3, 3}));
  std::mt19937_64 rng(2);
  Tensor x = RandomTensor(Shape{3, 2, 8, 8}, &rng);
  Tensor y = RunForward(conv.get(), {x}, out);
  ExpectNear(
      y,
      ReferenceConv(x, conv->variables()[0].value, conv->variables()[1].value, 2, Padding::kValid),
      1e-4f);
  CheckGradients(conv.get(), {x}, out);
}

TEST(Conv2DTest, BlockedLayoutChannelsMatchNumericGradient) {
  // 16 -> 32 channels makes oneDNN pick blocked layouts, exercising the reorders.
  Shape out;
  auto conv = MakeLayer("{type: conv2d, filters: 32, kernel: 3, padding: SAME, use_bias: false}",
                        {Shape{16, 5, 5}}, &out);
  std::mt19937_64 rng(3);
  Tensor x = RandomTensor(Shape{2, 16, 5, 5}, &rng);
  Tensor y = RunForward(conv.get(), {x}, out);
  ExpectNear(y, ReferenceConv(x, conv->variables()[0].value, Tensor(), 1, Padding::kSame), 1e-4f);
  CheckGradients(conv.get(), {x}, out);
}

TEST(PoolTest, MaxSameStride2OnOddSizeMatchesReferenceAndNumericGradient) {
  Shape out;
  auto pool =
      MakeLayer("{type: max_pool, size: 3, stride: 2, padding: SAME}", {Shape{2, 7, 7}}, &out);
  EXPECT_EQ(out, (Shape{2, 4, 4}));
  Tensor x = DistinctValues(Shape{2, 2, 7, 7}, 4);
  ExpectNear(RunForward(pool.get(), {x}, out), ReferencePool(x, true, 3, 2, Padding::kSame), 1e-6f);
  CheckGradients(pool.get(), {x}, out);
}

TEST(PoolTest, MaxValidWithLeftoverPixelsMatchesNumericGradient) {
  Shape out;
  auto pool = MakeLayer("{type: max_pool, size: 2}", {Shape{3, 5, 5}}, &out);
  EXPECT_EQ(out, (Shape{3, 2, 2}));
  Tensor x = DistinctValues(Shape{2, 3, 5, 5}, 5);
  ExpectNear(RunForward(pool.get(), {x}, out), ReferencePool(x, true, 2, 2, Padding::kValid),
             1e-6f);
  CheckGradients(pool.get(), {x}, out);
}

TEST(PoolTest, AvgSameExcludesPaddingAndMatchesNumericGradient) {
  Shape out;
  auto pool =
      MakeLayer("{type: avg_pool, size: 3, stride: 2, padding: SAME}", {Shape{2, 6, 5}}, &out);
  EXPECT_EQ(out, (Shape{2, 3, 3}));
  std::mt19937_64 rng(6);
  Tensor x = RandomTensor(Shape{2, 2, 6, 5}, &rng);
  ExpectNear(RunForward(pool.get(), {x}, out), ReferencePool(x, false, 3, 2, Padding::kSame),
             1e-5f);
  CheckGradients(pool.get(), {x}, out);
}

TEST(ReluTest, MatchesNumericGradient) {
  Shape out;
  auto relu = MakeLayer("{type: relu}", {Shape{3, 4, 4}}, &out);
  CheckGradients(relu.get(), {DistinctValues(Shape{2, 3, 4, 4}, 7)}, out);
}

TEST(FullyConnectedTest, MatchesReferenceAndNumericGradient) {
  Shape out;
  auto fc = MakeLayer("{type: fully_connected, units: 5}", {Shape{7}}, &out);
  std::mt19937_64 rng(8);
  Tensor x = RandomTensor(Shape{3, 7}, &rng);
  Tensor& w = fc->variables()[0].value;
  fc->variables()[1].value.CopyFrom(RandomTensor(Shape{5}, &rng));
  Tensor y = RunForward(fc.get(), {x}, out);
  for (int i = 0; i < 3; ++i)
    for (int u = 0; u < 5; ++u) {
      double s = fc->variables()[1].value[u];
      for (int f = 0; f < 7; ++f) s += x[i * 7 + f] * w[u * 7 + f];
      EXPECT_NEAR(y[i * 5 + u], s, 1e-5);
    }
  CheckGradients(fc.get(), {x}, out);
}

TEST(FullyConnectedTest, RefusesAnUnflattenedInput) {
  auto layer = LayerRegistry::Global().Create("fully_connected", "fc1").value();
  ASSERT_TRUE(layer->Configure(ConfigNode::Parse("{units: 3}", "t").value()).ok());
  Status s = layer->Setup({Shape{64, 7, 7}}).status();
  EXPECT_NE(s.message().find("layer 'fc1' (fully_connected)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("[64,7,7]"), std::string::npos) << s.message();
}

TEST(FlattenTest, MatchesNumericGradient) {
  Shape out;
  auto flat = MakeLayer("{type: flatten}", {Shape{2, 3, 3}}, &out);
  EXPECT_EQ(out, (Shape{18}));
  std::mt19937_64 rng(9);
  CheckGradients(flat.get(), {RandomTensor(Shape{2, 2, 3, 3}, &rng)}, out);
}

TEST(DropoutTest, FixedSeedMatchesNumericGradientAndKeepsAboutKeepProb) {
  Shape out;
  auto drop = MakeLayer("{type: dropout, keep_prob: 0.7}", {Shape{10, 10}}, &out);
  std::mt19937_64 rng(10);
  Tensor x = RandomTensor(Shape{4, 10, 10}, &rng, 0.5f, 1.0f);
  Tensor y = RunForward(drop.get(), {x}, out);
  int kept = 0;
  for (int64_t i = 0; i < y.size(); ++i) {
    if (y[i] != 0.0f) {
      ++kept;
      EXPECT_NEAR(y[i], x[i] / 0.7f, 1e-6);
    }
  }
  EXPECT_NEAR(kept / 400.0, 0.7, 0.08);
  CheckGradients(drop.get(), {x}, out);
}

TEST(DropoutTest, IsIdentityInEvaluation) {
  Shape out;
  auto drop = MakeLayer("{type: dropout, keep_prob: 0.5}", {Shape{50}}, &out);
  std::mt19937_64 rng(11);
  Tensor x = RandomTensor(Shape{2, 50}, &rng);
  ExpectNear(RunForward(drop.get(), {x}, out, /*training=*/false), x, 0.0f);
  GradientCheckOptions opt;
  opt.training = false;
  CheckGradients(drop.get(), {x}, out, opt);
}

TEST(BatchNormTest, TrainingModeMatchesNumericGradient) {
  Shape out;
  auto bn = MakeLayer("{type: batch_norm}", {Shape{3, 4, 5}}, &out);
  std::mt19937_64 rng(12);
  bn->variables()[0].value.CopyFrom(RandomTensor(Shape{3}, &rng, 0.5f, 1.5f));
  bn->variables()[1].value.CopyFrom(RandomTensor(Shape{3}, &rng));
  Tensor x = RandomTensor(Shape{4, 3, 4, 5}, &rng, -2.0f, 3.0f);
  GradientCheckOptions opt;
  opt.step = 1e-2f;
  CheckGradients(bn.get(), {x}, out, opt);
}

TEST(BatchNormTest, EvaluationModeUsesMovingStatisticsAndMatchesNumericGradient) {
  Shape out;
  auto bn = MakeLayer("{type: batch_norm, epsilon: 0.001}", {Shape{2, 3, 3}}, &out);
  bn->variables()[2].value.CopyFrom(Tensor::FromVector(Shape{2}, {0.5f, -1.0f}));
  bn->variables()[3].value.CopyFrom(Tensor::FromVector(Shape{2}, {4.0f, 0.25f}));
  std::mt19937_64 rng(13);
  Tensor x = RandomTensor(Shape{3, 2, 3, 3}, &rng);
  Tensor y = RunForward(bn.get(), {x}, out, /*training=*/false);
  EXPECT_NEAR(y[0], (x[0] - 0.5f) / std::sqrt(4.001f), 1e-5);
  EXPECT_NEAR(y[9], (x[9] + 1.0f) / std::sqrt(0.251f), 1e-5);
  GradientCheckOptions opt;
  opt.training = false;
  CheckGradients(bn.get(), {x}, out, opt);
}

TEST(BatchNormTest, MovingStatisticsChangeOnlyInTraining) {
  Shape out;
  auto bn = MakeLayer("{type: batch_norm, momentum: 0.9}", {Shape{1, 2, 2}}, &out);
  Tensor x = Tensor::FromVector(Shape{2, 1, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  RunForward(bn.get(), {x}, out, /*training=*/false);
  EXPECT_EQ(bn->variables()[2].value[0], 0.0f);
  EXPECT_EQ(bn->variables()[3].value[0], 1.0f);
  RunForward(bn.get(), {x}, out, /*training=*/true);
  // batch mean 4.5, unbiased variance 6 (population 5.25 * 8/7)
  EXPECT_NEAR(bn->variables()[2].value[0], 0.1f * 4.5f, 1e-6);
  EXPECT_NEAR(bn->variables()[3].value[0], 0.9f + 0.1f * 6.0f, 1e-5);
}

TEST(AddTest, MatchesNumericGradientForBothInputs) {
  Shape out;
  auto add = MakeLayer("{type: add}", {Shape{2, 3, 3}, Shape{2, 3, 3}}, &out);
  std::mt19937_64 rng(14);
  CheckGradients(add.get(),
                 {RandomTensor(Shape{2, 2, 3, 3}, &rng), RandomTensor(Shape{2, 2, 3, 3}, &rng)},
                 out);
}

TEST(SoftmaxCrossEntropyTest, LossValueAndNumericGradient) {
  Shape out;
  auto ce = MakeLayer("{type: softmax_cross_entropy}", {Shape{4}}, &out);
  Tensor z = Tensor::FromVector(Shape{2, 4}, {1, 2, 3, 4, -1, 0, 0.5f, 2});
  std::vector<int32_t> labels{3, 1};
  std::mt19937_64 rng(1);
  LayerContext ctx{true, &rng, &labels};
  Tensor y = Tensor::Uninitialized(Shape{2});
  ce->Forward({&z}, &y, ctx);
  double lse0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(4.0));
  EXPECT_NEAR(y[0], lse0 - 4.0, 1e-5);
  GradientCheckOptions opt;
  opt.labels = labels;
  opt.step = 1e-3f;
  CheckGradients(ce.get(), {z}, out, opt);
}

}  // namespace
}  // namespace testing
}  // namespace worker
}  // namespace pstrain
