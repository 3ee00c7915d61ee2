// The optimizers' update on the GPU (worker/network/device_update.h) against the host's
// ps::Optimizer: every rule, a few steps from random values, gradients and slots, must leave the
// same values and slots; a non-finite gradient changes nothing. Skips when no GPU is visible.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "common/config.h"
#include "tests/gpu/gpu_test_util.h"
#include "worker/network/device_update.h"

namespace pstrain {
namespace worker {
namespace testing {
namespace {

std::unique_ptr<ps::Optimizer> OptimizerFrom(const std::string& yaml) {
  auto node = ConfigNode::Parse(yaml, "optimizer");
  EXPECT_TRUE(node.ok()) << node.status().ToString();
  auto opt = ps::Optimizer::FromConfig(node.value());
  EXPECT_TRUE(opt.ok()) << opt.status().ToString();
  return std::move(opt).value();
}

Tensor Random(const Shape& shape, std::mt19937_64* rng, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  Tensor t = Tensor::Uninitialized(shape);
  for (int64_t i = 0; i < t.size(); ++i) t[i] = u(*rng);
  return t;
}

// The largest |a - b| / max(1, |b|).
double MaxRelError(const Tensor& a, const Tensor& b) {
  double worst = 0;
  for (int64_t i = 0; i < b.size(); ++i) {
    const double e = std::fabs(double{a[i]} - b[i]) / std::max(1.0, std::fabs(double{b[i]}));
    worst = std::isnan(e) ? std::numeric_limits<double>::infinity() : std::max(worst, e);
  }
  return worst;
}

class GpuUpdateTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GpuUpdateTest, MatchesTheHostOptimizerOverSeveralSteps) {
  PSTRAIN_GPU_OR_SKIP(gpu);
  std::unique_ptr<ps::Optimizer> opt = OptimizerFrom(GetParam());
  std::mt19937_64 rng(7);
  // Two variables: one of odd size (a grid-stride loop's tail), one larger than a block.
  std::vector<Variable> vars(2);
  const Shape shapes[] = {Shape{37}, Shape{64, 129}};
  std::vector<Tensor> host_values;
  std::vector<ps::Slots> host_slots;
  std::vector<UpdatedVariable> updated;
  for (int i = 0; i < 2; ++i) {
    Variable& v = vars[i];
    v.name = "var" + std::to_string(i);
    v.value = Random(shapes[i], &rng, -1, 1);
    v.grad = Tensor::Uninitialized(shapes[i]);
    v.device_value = ToDevice(v.value, gpu);
    v.device_grad = ToDevice(v.value, gpu);
    host_values.push_back(v.value.Clone());
    // Slots away from their initial values, as after earlier steps (positive where squared).
    ps::Slots slots = opt->CreateSlots(shapes[i]);
    for (auto& [name, t] : slots) {
      t = name == "mg" ? Random(shapes[i], &rng, -0.1f, 0.1f) : Random(shapes[i], &rng, 0.1f, 0.5f);
    }
    UpdatedVariable u{&v, {}};
    for (const std::string& name : opt->slot_names()) u.slots.push_back(slots[name].Clone());
    host_slots.push_back(std::move(slots));
    updated.push_back(std::move(u));
  }
  std::vector<Variable*> all = {&vars[0], &vars[1]};
  auto update = NewGpuUpdate(gpu, opt->rule(), updated, all);
  ASSERT_TRUE(update.ok()) << update.status().ToString();
  for (int64_t step = 3; step < 6; ++step) {
    const float lr = 0.01f * static_cast<float>(step);
    for (int i = 0; i < 2; ++i) {
      Tensor g = Random(shapes[i], &rng, -2, 2);
      gpu->Upload({{&g, &vars[i].device_grad}});
      ASSERT_TRUE(opt->Apply(lr, step, g, &host_values[i], &host_slots[i]).ok());
    }
    ASSERT_TRUE((*update)->Apply(lr, step).ok());
  }
  (*update)->DownloadState();
  for (int i = 0; i < 2; ++i) {
    const double value_error = MaxRelError(vars[i].value, host_values[i]);
    EXPECT_LT(value_error, 1e-5) << GetParam() << " " << vars[i].name;
    std::printf("[ max rel error ] %s %s: %.2g\n", GetParam(), vars[i].name.c_str(), value_error);
    const std::vector<std::string> names = opt->slot_names();
    for (size_t k = 0; k < names.size(); ++k) {
      EXPECT_LT(MaxRelError(updated[i].slots[k], host_slots[i][names[k]]), 1e-5)
          << GetParam() << " " << vars[i].name << " slot " << names[k];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    EveryRuleWithGpuKernels, GpuUpdateTest,
    ::testing::Values("{type: sgd}", "{type: momentum, momentum: 0.9}",
                      "{type: momentum, momentum: 0.8, nesterov: true}",
                      "{type: adam, beta1: 0.8, beta2: 0.99, epsilon: 1.0e-6}",
                      "{type: adagrad, initial_accumulator_value: 0.2}",
                      "{type: rmsprop, decay: 0.8, momentum: 0.5, epsilon: 1.0e-6}",
                      "{type: rmsprop, decay: 0.9, epsilon: 1.0e-6, centered: true}"));

TEST(GpuUpdateRefusalTest, ANonFiniteGradientChangesNothingAndNamesTheVariable) {
  PSTRAIN_GPU_OR_SKIP(gpu);
  std::unique_ptr<ps::Optimizer> opt = OptimizerFrom("{type: adam}");
  std::mt19937_64 rng(3);
  std::vector<Variable> vars(2);
  std::vector<UpdatedVariable> updated;
  for (int i = 0; i < 2; ++i) {
    vars[i].name = i == 0 ? "fc/weights" : "fc/bias";
    vars[i].value = Random(Shape{300}, &rng, -1, 1);
    vars[i].grad = Tensor::Uninitialized(Shape{300});
    vars[i].device_value = ToDevice(vars[i].value, gpu);
    Tensor g = Random(Shape{300}, &rng, -1, 1);
    if (i == 1) g[123] = std::numeric_limits<float>::quiet_NaN();
    vars[i].device_grad = ToDevice(g, gpu);
    ps::Slots slots = opt->CreateSlots(Shape{300});
    updated.push_back({&vars[i], {slots["m"], slots["v"]}});
  }
  const Tensor before0 = vars[0].value.Clone(), before1 = vars[1].value.Clone();
  auto update = NewGpuUpdate(gpu, opt->rule(), updated, {&vars[0], &vars[1]});
  ASSERT_TRUE(update.ok()) << update.status().ToString();
  Status s = (*update)->Apply(0.1f, 0);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'fc/bias'"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("NaN or Inf"), std::string::npos) << s.ToString();
  (*update)->DownloadState();
  EXPECT_EQ(MaxRelError(vars[0].value, before0), 0.0) << "the finite variable changed";
  EXPECT_EQ(MaxRelError(vars[1].value, before1), 0.0);
  EXPECT_EQ(MaxRelError(updated[0].slots[0], Tensor::Filled(Shape{300}, 0.0f)), 0.0);
}

}  // namespace
}  // namespace testing
}  // namespace worker
}  // namespace pstrain
