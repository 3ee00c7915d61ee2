// Checks a layer's backward pass against central differences, as Caffe's GradientChecker:
// loss = sum(output * w) for fixed random w, so dloss/doutput = w; every input and trainable
// variable element (or a random sample of them for big tensors) is perturbed by +-step.
// Also what the table's tests share (tests/worker/layer_cases.h): a case's layer and inputs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/config.h"
#include "tests/worker/layer_cases.h"
#include "worker/network/layer.h"

namespace pstrain {
namespace worker {
namespace testing {

inline Tensor RandomTensor(const Shape& shape, std::mt19937_64* rng, float lo = -1.0f,
                           float hi = 1.0f) {
  Tensor t = Tensor::Uninitialized(shape);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.size(); ++i) t[i] = dist(*rng);
  return t;
}

// Values spaced well beyond the finite-difference step, so max pooling and ReLU have no kink
// between x - step and x + step.
inline Tensor DistinctValues(const Shape& shape, uint64_t seed) {
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

inline Shape Batched(int64_t n, const Shape& s) {
  std::vector<int64_t> d{n};
  d.insert(d.end(), s.dims().begin(), s.dims().end());
  return Shape(d);
}

// Builds a layer of `type` from YAML fields and sets it up for per-example `input_shapes`.
inline std::unique_ptr<Layer> MakeLayer(const std::string& yaml,
                                        const std::vector<Shape>& input_shapes,
                                        Shape* output_shape) {
  auto node = ConfigNode::Parse(yaml, "test");
  EXPECT_TRUE(node.ok()) << node.status().ToString();
  auto type = node->GetString("type");
  auto layer = LayerRegistry::Global().Create(type.value(), "layer");
  EXPECT_TRUE(layer.ok()) << layer.status().ToString();
  std::unique_ptr<Layer> l = std::move(layer).value();
  Status s = l->Configure(node.value());
  EXPECT_TRUE(s.ok()) << s.ToString();
  auto shape = l->Setup(input_shapes);
  EXPECT_TRUE(shape.ok()) << shape.status().ToString();
  *output_shape = shape.value();
  std::mt19937_64 rng(7);
  l->InitVariables(&rng);
  return l;
}

struct GradientCheckOptions {
  float step = 1e-2f;
  float tolerance = 2e-2f;  // relative to max(|analytic|, |numeric|, 1)
  int max_checks_per_tensor = 200;
  bool training = true;
  uint64_t seed = 1234;         // the layer's random generator is reset to this for every run
  std::vector<int32_t> labels;  // for loss layers
};

// Runs forward (and backward) on `inputs` (batch tensors) and compares gradients. Returns the
// largest |numeric - analytic| / max(|numeric|, |analytic|, 1) seen.
inline double CheckGradients(Layer* layer, std::vector<Tensor> inputs, const Shape& out_shape,
                             const GradientCheckOptions& opt = {}) {
  const int64_t n = inputs[0].dim(0);
  std::vector<int64_t> dims{n};
  dims.insert(dims.end(), out_shape.dims().begin(), out_shape.dims().end());
  Tensor out = Tensor::Uninitialized(Shape(dims));
  std::mt19937_64 wrng(99);
  Tensor w = RandomTensor(out.shape(), &wrng);

  auto forward = [&](Tensor* y) {
    std::mt19937_64 rng(opt.seed);
    LayerContext ctx{opt.training, &rng, &opt.labels};
    std::vector<const Tensor*> in;
    for (auto& t : inputs) in.push_back(&t);
    layer->Forward(in, y, ctx);
  };
  auto loss = [&]() {
    Tensor y = Tensor::Uninitialized(out.shape());
    forward(&y);
    double s = 0.0;
    for (int64_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * w[i];
    return s;
  };

  // Analytic gradients. Batch norm's moving statistics change on every training forward; they
  // don't enter the training output, so repeated forwards see the same function.
  forward(&out);
  std::vector<Tensor> in_grads;
  std::vector<Tensor*> in_grad_ptrs;
  for (auto& t : inputs) in_grads.push_back(Tensor::Filled(t.shape(), NAN));
  for (auto& g : in_grads) in_grad_ptrs.push_back(&g);
  {
    std::mt19937_64 rng(opt.seed);
    LayerContext ctx{opt.training, &rng, &opt.labels};
    std::vector<const Tensor*> in;
    for (auto& t : inputs) in.push_back(&t);
    layer->Backward(in, out, w, in_grad_ptrs, ctx);
  }

  struct Target {
    std::string name;
    Tensor value;
    Tensor grad;
  };
  std::vector<Target> targets;
  for (size_t i = 0; i < inputs.size(); ++i) {
    targets.push_back({"input " + std::to_string(i), inputs[i], in_grads[i]});
  }
  for (auto& v : layer->variables()) {
    if (v.trainable) targets.push_back({v.name, v.value, v.grad.Clone()});
  }
  std::mt19937_64 pick(5);
  double max_error = 0.0;
  for (auto& t : targets) {
    const int64_t size = t.value.size();
    const bool all = size <= opt.max_checks_per_tensor;
    const int checks = all ? static_cast<int>(size) : opt.max_checks_per_tensor;
    int failures = 0;
    for (int c = 0; c < checks; ++c) {
      const int64_t i = all ? c : static_cast<int64_t>(pick() % size);
      const float orig = t.value[i];
      t.value[i] = orig + opt.step;
      const double up = loss();
      t.value[i] = orig - opt.step;
      const double down = loss();
      t.value[i] = orig;
      const double numeric = (up - down) / (2.0 * opt.step);
      const double analytic = t.grad[i];
      const double scale = std::max({std::fabs(numeric), std::fabs(analytic), 1.0});
      max_error = std::max(max_error, std::fabs(numeric - analytic) / scale);
      if (!(std::fabs(numeric - analytic) <= opt.tolerance * scale) && failures++ < 5) {
        ADD_FAILURE() << layer->Describe() << " " << t.name << "[" << i << "]: analytic "
                      << analytic << " vs numeric " << numeric;
      }
    }
    EXPECT_EQ(failures, 0) << t.name << ": " << failures << " of " << checks << " differ";
  }
  return max_error;
}

// The table's cases with `flag` set (&LayerCase::check_gradient, &LayerCase::compare_devices).
inline std::vector<LayerCase> CasesWhere(bool LayerCase::*flag) {
  std::vector<LayerCase> out;
  for (const LayerCase& c : LayerCases()) {
    if (c.*flag) out.push_back(c);
  }
  return out;
}

inline std::string CaseName(const ::testing::TestParamInfo<LayerCase>& info) {
  return info.param.name;
}

inline const LayerCase& FindCase(const std::string& name) {
  for (const LayerCase& c : LayerCases()) {
    if (c.name == name) return c;
  }
  ADD_FAILURE() << "no case '" << name << "' in tests/worker/layer_cases.h";
  return LayerCases().front();
}

inline std::string CaseLayerType(const LayerCase& c) {
  auto node = ConfigNode::Parse(c.yaml, c.name);
  if (!node.ok()) return "";
  auto type = node->GetString("type");
  return type.ok() ? *type : "";
}

// A case's layer: set up, initialised, then the case's variables set.
inline std::unique_ptr<Layer> MakeCaseLayer(const LayerCase& c, Shape* output_shape) {
  std::unique_ptr<Layer> layer = MakeLayer(c.yaml, c.inputs, output_shape);
  for (const auto& [short_name, values] : c.variables) {
    auto& vars = layer->variables();
    auto v = std::find_if(vars.begin(), vars.end(),
                          [&](const Variable& v) { return v.name == "layer/" + short_name; });
    if (v == vars.end() || v->value.size() != static_cast<int64_t>(values.size())) {
      ADD_FAILURE() << c.name << ": no variable '" << short_name << "' of " << values.size()
                    << " values";
      continue;
    }
    std::copy(values.begin(), values.end(), v->value.data());
  }
  return layer;
}

// Integers uniform in [lo, hi], as floats.
inline Tensor RandomIndices(const Shape& shape, std::mt19937_64* rng, float lo, float hi) {
  Tensor t = Tensor::Uninitialized(shape);
  std::uniform_int_distribution<int64_t> dist(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
  for (int64_t i = 0; i < t.size(); ++i) t[i] = static_cast<float>(dist(*rng));
  return t;
}

// A case's inputs, batch tensors.
inline std::vector<Tensor> CaseInputs(const LayerCase& c) {
  std::mt19937_64 rng(c.seed);
  std::vector<Tensor> out;
  for (const Shape& s : c.inputs) {
    switch (c.values) {
      case InputValues::kDistinct:
        out.push_back(DistinctValues(Batched(c.batch, s), rng()));
        break;
      case InputValues::kIndices:
        out.push_back(RandomIndices(Batched(c.batch, s), &rng, c.lo, c.hi));
        break;
      case InputValues::kUniform:
        out.push_back(RandomTensor(Batched(c.batch, s), &rng, c.lo, c.hi));
        break;
    }
  }
  return out;
}

}  // namespace testing
}  // namespace worker
}  // namespace pstrain
