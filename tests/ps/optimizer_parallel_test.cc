// Big variables take the multi-threaded, vectorised path; it must agree with a plain scalar
// loop of the same formulas, element by element, including the ragged tail.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <ostream>

#include "ps/optimizer.h"
#include "tests/ps/optimizer_test_util.h"

namespace pstrain::ps {
namespace {

// Well above the 32K-element threshold, and not a multiple of any vector width.
constexpr int64_t kElements = (1 << 20) + 3;
constexpr float kLr = 0.01f;

using Reference = std::function<void(int64_t step, const float* g, float* var, Slots* slots)>;

struct ParallelCase {
  std::string name;
  std::string config;
  Reference reference;
};

void PrintTo(const ParallelCase& c, std::ostream* os) { *os << c.config; }

void Sgd(int64_t, const float* g, float* var, Slots*) {
  for (int64_t i = 0; i < kElements; ++i) var[i] -= kLr * g[i];
}

Reference Momentum(bool nesterov) {
  return [nesterov](int64_t, const float* g, float* var, Slots* slots) {
    float* a = slots->at("momentum").data();
    for (int64_t i = 0; i < kElements; ++i) {
      a[i] = a[i] * 0.9f + g[i];
      var[i] -= nesterov ? g[i] * kLr + a[i] * 0.9f * kLr : a[i] * kLr;
    }
  };
}

void Adam(int64_t step, const float* g, float* var, Slots* slots) {
  float* m = slots->at("m").data();
  float* v = slots->at("v").data();
  const double t = step + 1.0;
  const float lr_t = kLr * std::sqrt(1.0 - std::pow(0.999, t)) / (1.0 - std::pow(0.9, t));
  for (int64_t i = 0; i < kElements; ++i) {
    m[i] = 0.9f * m[i] + 0.1f * g[i];
    v[i] = 0.999f * v[i] + 0.001f * g[i] * g[i];
    var[i] -= lr_t * m[i] / (std::sqrt(v[i]) + 1e-8f);
  }
}

void Adagrad(int64_t, const float* g, float* var, Slots* slots) {
  float* a = slots->at("accumulator").data();
  for (int64_t i = 0; i < kElements; ++i) {
    a[i] += g[i] * g[i];
    var[i] -= kLr * g[i] / std::sqrt(a[i]);
  }
}

Reference RMSProp(bool centered) {
  return [centered](int64_t, const float* g, float* var, Slots* slots) {
    float* ms = slots->at("ms").data();
    float* mom = slots->at("mom").data();
    float* mg = centered ? slots->at("mg").data() : nullptr;
    for (int64_t i = 0; i < kElements; ++i) {
      ms[i] = 0.9f * ms[i] + 0.1f * g[i] * g[i];
      float denom = ms[i];
      if (centered) {
        mg[i] = 0.9f * mg[i] + 0.1f * g[i];
        denom -= mg[i] * mg[i];
      }
      mom[i] = 0.5f * mom[i] + kLr * g[i] / std::sqrt(denom + 1e-10f);
      var[i] -= mom[i];
    }
  };
}

// Counts elements further apart than float rounding of the two orders of operations allows.
int64_t CountMismatches(const Tensor& actual, const Tensor& expected, int64_t* first) {
  int64_t count = 0;
  for (int64_t i = 0; i < expected.size(); ++i) {
    const float tolerance = 1e-6f + 1e-5f * std::abs(expected[i]);
    if (!(std::abs(actual[i] - expected[i]) <= tolerance)) {
      if (count++ == 0) *first = i;
    }
  }
  return count;
}

class OptimizerParallelTest : public ::testing::TestWithParam<ParallelCase> {};

TEST_P(OptimizerParallelTest, LargeVariableMatchesScalarReference) {
  auto optimizer = MustOptimizer(GetParam().config);
  Tensor var(Shape{kElements});
  for (int64_t i = 0; i < kElements; ++i) var[i] = std::sin(0.001f * i);
  Slots slots = optimizer->CreateSlots(var.shape());
  Tensor ref_var = var.Clone();
  Slots ref_slots = optimizer->CreateSlots(var.shape());
  Tensor grad(Shape{kElements});
  for (int64_t step = 0; step < 3; ++step) {
    for (int64_t i = 0; i < kElements; ++i) grad[i] = std::cos(0.0007f * i * (step + 1));
    ASSERT_TRUE(optimizer->Apply(kLr, step, grad, &var, &slots).ok());
    GetParam().reference(step, grad.data(), ref_var.data(), &ref_slots);
  }
  int64_t first = -1;
  EXPECT_EQ(CountMismatches(var, ref_var, &first), 0)
      << "first at " << first << ": " << (first >= 0 ? var[first] : 0.0f) << " vs "
      << (first >= 0 ? ref_var[first] : 0.0f);
  for (const auto& [name, tensor] : ref_slots) {
    EXPECT_EQ(CountMismatches(slots.at(name), tensor, &first), 0) << "slot " << name;
  }
}

std::string CaseName(const ::testing::TestParamInfo<ParallelCase>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(
    AllOptimizers, OptimizerParallelTest,
    ::testing::Values(ParallelCase{"Sgd", "{type: sgd}", Sgd},
                      ParallelCase{"Momentum", "{type: momentum}", Momentum(false)},
                      ParallelCase{"Nesterov", "{type: momentum, nesterov: true}", Momentum(true)},
                      ParallelCase{"Adam", "{type: adam}", Adam},
                      ParallelCase{"Adagrad", "{type: adagrad}", Adagrad},
                      ParallelCase{"RMSProp", "{type: rmsprop, momentum: 0.5}", RMSProp(false)},
                      ParallelCase{"CenteredRMSProp",
                                   "{type: rmsprop, momentum: 0.5, centered: true}",
                                   RMSProp(true)}),
    CaseName);

}  // namespace
}  // namespace pstrain::ps
