// Each optimizer against updates worked out by hand with TF 1.x's formulas. All tests use
// var = [1, -2], lr = 0.1 and the gradients g0 = [0.5, -1], g1 = [0.25, 1], g2 = [-0.5, 0.5].
#include "ps/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ps/denormals.h"
#include "ps/parallel.h"
#include "tests/ps/optimizer_test_util.h"

namespace pstrain::ps {
namespace {

const std::vector<std::vector<float>> kGrads = {{0.5f, -1.0f}, {0.25f, 1.0f}, {-0.5f, 0.5f}};
constexpr float kLr = 0.1f;

// Applies kGrads[step] at global step `step` and returns the variable afterwards.
Tensor Step(const Optimizer& optimizer, int step, Tensor* var, Slots* slots) {
  Status status = optimizer.Apply(kLr, step, Vec(kGrads[step]), var, slots);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return *var;
}

TEST(OptimizerTest, SgdSubtractsLearningRateTimesGradient) {
  auto sgd = NewSgdOptimizer();
  Tensor var = Vec({1.0f, -2.0f});
  Slots slots = sgd->CreateSlots(var.shape());
  EXPECT_TRUE(slots.empty());
  // 1 - 0.1 * 0.5 = 0.95; -2 - 0.1 * -1 = -1.9.
  ExpectValues(Step(*sgd, 0, &var, &slots), {0.95, -1.9}, "step 0");
  // 0.95 - 0.025 = 0.925; -1.9 - 0.1 = -2.0.
  ExpectValues(Step(*sgd, 1, &var, &slots), {0.925, -2.0}, "step 1");
}

TEST(OptimizerTest, MomentumAccumulatesVelocity) {
  auto momentum = NewMomentumOptimizer({0.9f, false}).value();
  Tensor var = Vec({1.0f, -2.0f});
  Slots slots = momentum->CreateSlots(var.shape());
  // accum = 0.9 accum + g; var -= 0.1 accum.
  // step 0: accum = [0.5, -1];          var = [1 - 0.05, -2 + 0.1]        = [0.95, -1.9]
  ExpectValues(Step(*momentum, 0, &var, &slots), {0.95, -1.9}, "step 0");
  // step 1: accum = [0.45 + 0.25, -0.9 + 1] = [0.7, 0.1]; var = [0.95 - 0.07, -1.9 - 0.01]
  ExpectValues(Step(*momentum, 1, &var, &slots), {0.88, -1.91}, "step 1");
  // step 2: accum = [0.63 - 0.5, 0.09 + 0.5] = [0.13, 0.59]; var = [0.88 - 0.013, -1.91 - 0.059]
  ExpectValues(Step(*momentum, 2, &var, &slots), {0.867, -1.969}, "step 2");
  ExpectValues(slots.at("momentum"), {0.13, 0.59}, "accumulator");
}

TEST(OptimizerTest, NesterovMomentumStepsWithGradientPlusMomentumTimesAccumulator) {
  auto nesterov = NewMomentumOptimizer({0.9f, true}).value();
  Tensor var = Vec({1.0f, -2.0f});
  Slots slots = nesterov->CreateSlots(var.shape());
  // accum as without Nesterov; var -= 0.1 g + 0.1 * 0.9 accum.
  // step 0: accum = [0.5, -1]; var = [1 - (0.05 + 0.045), -2 - (-0.1 - 0.09)] = [0.905, -1.81]
  ExpectValues(Step(*nesterov, 0, &var, &slots), {0.905, -1.81}, "step 0");
  // step 1: accum = [0.7, 0.1]; var = [0.905 - (0.025 + 0.063), -1.81 - (0.1 + 0.009)]
  ExpectValues(Step(*nesterov, 1, &var, &slots), {0.817, -1.919}, "step 1");
  // step 2: accum = [0.13, 0.59]; var = [0.817 - (-0.05 + 0.0117), -1.919 - (0.05 + 0.0531)]
  ExpectValues(Step(*nesterov, 2, &var, &slots), {0.8553, -2.0221}, "step 2");
}

TEST(OptimizerTest, AdamMatchesHandComputedStepsZeroToTwo) {
  auto adam = NewAdamOptimizer({0.9f, 0.999f, 1e-8f}).value();
  Tensor var = Vec({1.0f, -2.0f});
  Slots slots = adam->CreateSlots(var.shape());
  // m = m + 0.1 (g - m); v = v + 0.001 (g^2 - v);
  // lr_t = 0.1 sqrt(1 - 0.999^t) / (1 - 0.9^t), t = step + 1; var -= lr_t m / (sqrt(v) + 1e-8).
  // step 0: lr_t = 0.1 sqrt(0.001) / 0.1 = 0.0316228; m = [0.05, -0.1];
  //   v = [0.00025, 0.001]; var[0] = 1 - 0.0316228 * 0.05 / (0.0158114 + 1e-8) = 0.9000001
  ExpectValues(Step(*adam, 0, &var, &slots), {0.9000000632, -1.9000000316}, "step 0");
  // step 1: lr_t = 0.1 sqrt(0.001999) / 0.19 = 0.0235317; m = [0.07, 0.01];
  //   v = [0.00031225, 0.001999]; var[0] = 0.9000001 - 0.0235317 * 0.07 / 0.0176706
  ExpectValues(Step(*adam, 1, &var, &slots), {0.8067821521, -1.9052631883}, "step 1");
  // step 2: lr_t = 0.1 sqrt(0.002997001) / 0.271 = 0.0202011; m = [0.013, 0.059];
  //   v = [0.00056193775, 0.002247001]; var[0] = 0.8067822 - 0.0202011 * 0.013 / 0.0237052
  ExpectValues(Step(*adam, 2, &var, &slots), {0.7957038497, -1.9304066136}, "step 2");
  ExpectValues(slots.at("m"), {0.013, 0.059}, "m");
  ExpectValues(slots.at("v"), {0.00056193775, 0.002247001}, "v");
}

TEST(OptimizerTest, AdamBiasCorrectionComesFromTheGlobalStep) {
  auto adam = NewAdamOptimizer({0.9f, 0.999f, 1e-8f}).value();
  Tensor var = Vec({1.0f, -2.0f});
  Slots slots = adam->CreateSlots(var.shape());
  // Fresh slots but global step 9 (t = 10): lr_t = 0.1 sqrt(1 - 0.999^10) / (1 - 0.9^10)
  //   = 0.1 * 0.0997753 / 0.6513216 = 0.0153189; m = [0.05, -0.1]; v = [0.00025, 0.001];
  //   var[0] = 1 - 0.0153189 * 0.05 / 0.0158114 = 0.9515574 (0.9000001 at global step 0).
  ASSERT_TRUE(adam->Apply(kLr, 9, Vec(kGrads[0]), &var, &slots).ok());
  ExpectValues(var, {0.9515573920, -1.9515573767}, "after global step 9");
}

TEST(OptimizerTest, AdagradAccumulatorStartsAtPointOne) {
  auto adagrad = NewAdagradOptimizer({}).value();
  Tensor var = Vec({1.0f, -2.0f});
  Slots slots = adagrad->CreateSlots(var.shape());
  ExpectValues(slots.at("accumulator"), {0.1, 0.1}, "initial accumulator");
  // accum += g^2; var -= 0.1 g / sqrt(accum).
  // step 0: accum = [0.35, 1.1]; var = [1 - 0.05 / 0.5916080, -2 + 0.1 / 1.0488088]
  ExpectValues(Step(*adagrad, 0, &var, &slots), {0.9154845745, -1.9046537411}, "step 0");
  // step 1: accum = [0.4125, 2.1]; var = [0.9154846 - 0.025 / 0.6422616, ... - 0.1 / 1.4491377]
  ExpectValues(Step(*adagrad, 1, &var, &slots), {0.8765596273, -1.9736602970}, "step 1");
  // step 2: accum = [0.6625, 2.35]; var = [0.8765596 + 0.05 / 0.8139410, ... - 0.05 / 1.5329710]
  ExpectValues(Step(*adagrad, 2, &var, &slots), {0.9379891390, -2.0062767007}, "step 2");
  ExpectValues(slots.at("accumulator"), {0.6625, 2.35}, "accumulator");
}

TEST(OptimizerTest, AdagradUsesConfiguredInitialAccumulator) {
  auto adagrad = NewAdagradOptimizer({1.0f}).value();
  Tensor var = Vec({1.0f, -2.0f});
  Slots slots = adagrad->CreateSlots(var.shape());
  // accum = 1 + [0.25, 1] = [1.25, 2]; var = [1 - 0.05 / 1.1180340, -2 + 0.1 / 1.4142136]
  ExpectValues(Step(*adagrad, 0, &var, &slots), {0.9552786405, -1.9292893219}, "step 0");
}

TEST(OptimizerTest, FtrlZeroesCoordinatesWhoseLinearTermIsWithinL1) {
  FtrlOptions options;
  options.l1_regularization_strength = 2.5f;
  options.l2_regularization_strength = 0.2f;
  auto ftrl = NewFtrlOptimizer(options).value();
  Tensor var = Vec({1.0f, -2.0f});
  Slots slots = ftrl->CreateSlots(var.shape());
  ExpectValues(slots.at("accumulator"), {0.1, 0.1}, "initial accumulator");
  // a' = a + g^2; linear += g - (sqrt(a') - sqrt(a)) / 0.1 * var;
  // var = |linear| > 2.5 ? (sign(linear) 2.5 - linear) / (sqrt(a') / 0.1 + 0.4) : 0.
  // step 0: a' = [0.35, 1.1]; linear = [0.5 - 2.7538021, -1 + 7.3257119 * 2] = [-2.2538021,
  // 13.6516216]: the first is within l1, so 0; the second (2.5 - 13.6516216) / 10.8880885.
  ExpectValues(Step(*ftrl, 0, &var, &slots), {0.0, -1.024204}, "step 0");
  // step 1: a' = [0.4125, 2.1]; linear = [-2.0038021, 18.7518]: 0 and -16.2518 / 14.8913767.
  ExpectValues(Step(*ftrl, 1, &var, &slots), {0.0, -1.091357}, "step 1");
  ExpectValues(slots.at("linear"), {-2.003802, 18.7518}, "linear");
  ExpectValues(slots.at("accumulator"), {0.4125, 2.1}, "accumulator");
}

TEST(OptimizerTest, RMSPropMatchesHandComputedSteps) {
  auto rmsprop = NewRMSPropOptimizer({0.9f, 0.5f, 1e-10f, false}).value();
  Tensor var = Vec({1.0f, -2.0f});
  Slots slots = rmsprop->CreateSlots(var.shape());
  // TF 1.x starts ms at 1. ms += 0.1 (g^2 - ms); mom = 0.5 mom + 0.1 g / sqrt(ms + 1e-10);
  // var -= mom.
  // step 0: ms = [0.925, 1]; mom = [0.05 / 0.9617692, -0.1] = [0.0519875, -0.1]
  ExpectValues(Step(*rmsprop, 0, &var, &slots), {0.9480124755, -1.9}, "step 0");
  // step 1: ms = [0.83875, 1]; mom = [0.0259938 + 0.025 / 0.9158330, -0.05 + 0.1]
  ExpectValues(Step(*rmsprop, 1, &var, &slots), {0.8947211587, -1.95}, "step 1");
  // step 2: ms = [0.779875, 0.925]; mom = [0.0266457 - 0.05 / 0.8831053, 0.025 + 0.0519875]
  ExpectValues(Step(*rmsprop, 2, &var, &slots), {0.9246938890, -2.0269875245}, "step 2");
  ExpectValues(slots.at("ms"), {0.779875, 0.925}, "ms");
  ExpectValues(slots.at("mom"), {-0.0299727302, 0.0769875245}, "mom");
}

TEST(OptimizerTest, CenteredRMSPropSubtractsSquaredMeanGradient) {
  auto rmsprop = NewRMSPropOptimizer({0.9f, 0.5f, 1e-10f, true}).value();
  Tensor var = Vec({1.0f, -2.0f});
  Slots slots = rmsprop->CreateSlots(var.shape());
  // As above plus mg += 0.1 (g - mg), and sqrt(ms - mg^2 + 1e-10) in the denominator.
  // step 0: ms = [0.925, 1]; mg = [0.05, -0.1]; mom = [0.05 / sqrt(0.9225), -0.1 / sqrt(0.99)]
  ExpectValues(Step(*rmsprop, 0, &var, &slots), {0.9479420794, -1.8994962185}, "step 0");
  // step 1: mg = [0.07, 0.01]; mom = [0.0260290 + 0.025 / sqrt(0.83385), ...]
  ExpectValues(Step(*rmsprop, 1, &var, &slots), {0.8945354769, -1.9492493281}, "step 1");
  // step 2: mg = [0.013, 0.059]; mom = [0.0267033 - 0.05 / sqrt(0.779706), ...]
  ExpectValues(Step(*rmsprop, 2, &var, &slots), {0.9244567000, -2.0262115052}, "step 2");
  ExpectValues(slots.at("mg"), {0.013, 0.059}, "mg");
}

// Gradients at the bound, pushed many times, keep every optimizer's state and variable finite:
// the bound the server refuses above is one no update within it can break.
TEST(OptimizerTest, GradientsAtTheBoundKeepEveryOptimizerFinite) {
  for (const std::string& config : AllOptimizerConfigs()) {
    auto optimizer = MustOptimizer(config);
    const float bound = optimizer->gradient_bound();
    if (bound == std::numeric_limits<float>::max()) continue;  // no square to overflow
    EXPECT_EQ(bound, Optimizer::kSquaredGradientBound) << config;
    Tensor var = Vec({1.0f, -2.0f});
    Slots slots = optimizer->CreateSlots(var.shape());
    for (int step = 0; step < 100; ++step) {
      const float g = step % 2 ? bound : -bound;
      ASSERT_TRUE(optimizer->Apply(kLr, step, Vec({g, g}), &var, &slots).ok()) << config;
    }
    for (int64_t i = 0; i < var.size(); ++i) EXPECT_TRUE(std::isfinite(var[i])) << config;
    for (const auto& [name, t] : slots) {
      for (int64_t i = 0; i < t.size(); ++i) EXPECT_TRUE(std::isfinite(t[i])) << config << name;
    }
  }
}

// Which optimizers the squared bound holds: those whose state sums the gradient's square.
TEST(OptimizerTest, OnlyOptimizersThatSquareTheGradientTakeTheSquaredBound) {
  for (const char* type : {"adam", "adagrad", "ftrl", "rmsprop"}) {
    EXPECT_EQ(MustOptimizer(std::string("{type: ") + type + "}")->gradient_bound(),
              Optimizer::kSquaredGradientBound)
        << type;
  }
  for (const char* type : {"sgd", "momentum"}) {
    EXPECT_EQ(MustOptimizer(std::string("{type: ") + type + "}")->gradient_bound(),
              std::numeric_limits<float>::max())
        << type;
  }
}

// Subnormal moments are flushed to zero, as TensorFlow's CPU threads do: Adam's second moment of
// a 1e-20 gradient (1e-43) would otherwise be subnormal, and every later update of it 10-60x
// slower on x86. The calling thread and its OpenMP team flush from the first update on.
TEST(OptimizerTest, SubnormalMomentsAreFlushedToZeroInTheCallerAndItsThreadTeam) {
  auto adam = MustOptimizer("{type: adam}");
  const int64_t n = 4 * kMinParallelElements;  // a parallel update
  Tensor var = Tensor::Filled(Shape{n}, 1.0f);
  Slots slots = adam->CreateSlots(var.shape());
  ASSERT_TRUE(adam->Apply(kLr, 0, Tensor::Filled(Shape{n}, 1e-20f), &var, &slots).ok());
  for (int64_t i : {int64_t{0}, n / 2, n - 1}) {
    EXPECT_EQ(slots.at("v")[i], 0.0f) << "element " << i << " kept a subnormal";
    EXPECT_GT(slots.at("m")[i], 0.0f) << "element " << i;  // 1e-21: a normal float
  }
  EXPECT_TRUE(ThisThreadFlushesDenormals());
  int not_flushing = 0;
#pragma omp parallel reduction(+ : not_flushing)
  not_flushing += ThisThreadFlushesDenormals() ? 0 : 1;
  EXPECT_EQ(not_flushing, 0);
}

}  // namespace
}  // namespace pstrain::ps
