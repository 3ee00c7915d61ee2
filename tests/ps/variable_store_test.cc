#include "ps/variable_store.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace pstrain {
namespace ps {
namespace {

std::unique_ptr<VariableStore> MakeStore(const std::string& yaml) {
  auto node = ConfigNode::Parse(yaml, "train.yaml");
  EXPECT_TRUE(node.ok()) << node.status().ToString();
  auto store = VariableStore::FromConfig(node.value());
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return std::move(store).value();
}

TEST(VariableStoreTest, AppliesSgdToTheSharedBufferAndAdvancesTheStep) {
  auto store = MakeStore(
      "{optimizer: {type: sgd}, learning_rate: {schedule: piecewise_constant, "
      "boundaries: [0], values: [0.5, 0.1]}}");
  Tensor w = Tensor::FromVector(Shape{2}, {1.0f, 2.0f});
  ASSERT_TRUE(store->AddVariable("w", w).ok());
  EXPECT_FLOAT_EQ(store->learning_rate(), 0.5f);
  ASSERT_TRUE(store->ApplyGradients({{"w", Tensor::FromVector(Shape{2}, {1.0f, -2.0f})}}).ok());
  EXPECT_FLOAT_EQ(w[0], 0.5f);  // the caller's tensor sees the update: no copy
  EXPECT_FLOAT_EQ(w[1], 3.0f);
  EXPECT_EQ(store->global_step(), 1);
  EXPECT_FLOAT_EQ(store->learning_rate(), 0.1f);
}

TEST(VariableStoreTest, ClipsByNormBeforeTheOptimizer) {
  auto store = MakeStore(
      "{optimizer: {type: sgd}, learning_rate: {initial: 1.0}, clipping: {by_norm: 1.0}}");
  Tensor w = Tensor::FromVector(Shape{2}, {0.0f, 0.0f});
  ASSERT_TRUE(store->AddVariable("w", w).ok());
  ASSERT_TRUE(store->ApplyGradients({{"w", Tensor::FromVector(Shape{2}, {3.0f, 4.0f})}}).ok());
  EXPECT_NEAR(w[0], -0.6f, 1e-6);
  EXPECT_NEAR(w[1], -0.8f, 1e-6);
}

TEST(VariableStoreTest, LeavesTheGlobalNormToTheWorkers) {
  // by_global_norm is the worker's (ClippingOptions::WorkerSide): a server holds one shard of
  // a step's gradients, so it must not rescale them by that shard's norm.
  auto store = MakeStore(
      "{optimizer: {type: sgd}, learning_rate: {initial: 1.0}, "
      "clipping: {by_global_norm: 1.0, by_value: [-10, 10]}}");
  Tensor w = Tensor::FromVector(Shape{2}, {0.0f, 0.0f});
  ASSERT_TRUE(store->AddVariable("w", w).ok());
  ASSERT_TRUE(store->ApplyGradients({{"w", Tensor::FromVector(Shape{2}, {3.0f, 40.0f})}}).ok());
  EXPECT_FLOAT_EQ(w[0], -3.0f);   // not scaled to norm 1
  EXPECT_FLOAT_EQ(w[1], -10.0f);  // by_value is the server's
}

TEST(VariableStoreTest, EveryNanAndInfIsFoundAndEveryFiniteFloatPasses) {
  auto store = MakeStore("{optimizer: {type: sgd}, learning_rate: {initial: 0.1}}");
  ASSERT_TRUE(store->AddVariable("w", Tensor::Filled(Shape{1000}, 0.0f)).ok());
  const float finite[] = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          std::numeric_limits<float>::max(),
                          -std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::min(),
                          std::numeric_limits<float>::denorm_min()};
  const float bad[] = {
      std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
      std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
      std::numeric_limits<float>::signaling_NaN()};
  for (float f : finite) {
    Tensor g = Tensor::Filled(Shape{1000}, 0.0f);
    g[999] = f;
    EXPECT_TRUE(store->CheckGradient("w", g).ok()) << f;
  }
  for (float f : bad) {
    for (int64_t at : {0, 500, 999}) {  // first, middle and last: no lane of a vector skipped
      Tensor g = Tensor::Filled(Shape{1000}, 0.0f);
      g[at] = f;
      EXPECT_FALSE(store->CheckGradient("w", g).ok()) << f << " at " << at;
    }
  }
}

TEST(VariableStoreTest, AGradientThatWouldOverflowAdamsStateIsRefusedAndChangesNothing) {
  auto store = MakeStore("{optimizer: {type: adam}, learning_rate: {initial: 0.1}}");
  Tensor w = Tensor::FromVector(Shape{3}, {1.0f, 2.0f, 3.0f});
  ASSERT_TRUE(store->AddVariable("conv1/weights", w).ok());
  // A finite 1e30 squares to Inf in Adam's second moment: refused, naming what and why.
  Status s = store->ApplyGradients(
      {{"conv1/weights", Tensor::FromVector(Shape{3}, {0.5f, -1e30f, 0.0f})}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("gradient for 'conv1/weights' has an element of magnitude 1e+30"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("adam's state"), std::string::npos) << s.message();
  EXPECT_EQ(w[0], 1.0f);
  EXPECT_EQ(store->StateTensors().at("conv1/weights/v")[1], 0.0f);
  EXPECT_EQ(store->global_step(), 0);
  // The bound itself is accepted and leaves everything finite.
  const float bound = Optimizer::kSquaredGradientBound;
  const Tensor at_bound = Tensor::FromVector(Shape{3}, {bound, -bound, 1.0f});
  ASSERT_TRUE(store->ApplyGradients({{"conv1/weights", at_bound}}).ok());
  for (const auto& [name, t] : store->StateTensors()) {
    for (int64_t i = 0; i < t.size(); ++i) EXPECT_TRUE(std::isfinite(t[i])) << name << i;
  }
}

TEST(VariableStoreTest, BadGradientsChangeNothing) {
  auto store = MakeStore("{optimizer: {type: adam}, learning_rate: {initial: 0.1}}");
  Tensor a = Tensor::FromVector(Shape{2}, {1.0f, 2.0f});
  Tensor b = Tensor::FromVector(Shape{1}, {3.0f});
  ASSERT_TRUE(store->AddVariable("a", a).ok());
  ASSERT_TRUE(store->AddVariable("b", b).ok());
  EXPECT_EQ(store->AddVariable("a", a).code(), StatusCode::kAlreadyExists);

  Tensor good = Tensor::FromVector(Shape{2}, {1.0f, 1.0f});
  Status s = store->ApplyGradients({{"a", good}, {"b", Tensor::FromVector(Shape{1}, {NAN})}});
  EXPECT_NE(s.message().find("'b' holds NaN or Inf"), std::string::npos) << s.message();
  s = store->ApplyGradients({{"a", good}, {"b", Tensor::FromVector(Shape{2}, {1, 1})}});
  EXPECT_NE(s.message().find("has shape [2], the variable has [1]"), std::string::npos)
      << s.message();
  s = store->ApplyGradients({{"a", good}, {"nope", good}});
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  // Nothing moved, not even the variable whose gradient was fine, and no step was taken.
  EXPECT_EQ(a[0], 1.0f);
  EXPECT_EQ(b[0], 3.0f);
  EXPECT_EQ(store->global_step(), 0);
  EXPECT_EQ(store->StateTensors().at("a/m")[0], 0.0f);
}

TEST(VariableStoreTest, StateTensorsNameVariablesAndSlotsAndShareBuffers) {
  auto store = MakeStore("{optimizer: {type: adam}, learning_rate: {initial: 0.1}}");
  Tensor a = Tensor::FromVector(Shape{2}, {1.0f, 2.0f});
  ASSERT_TRUE(store->AddVariable("a", a).ok());
  auto state = store->StateTensors();
  ASSERT_EQ(state.size(), 3u);
  EXPECT_TRUE(state.count("a/m") && state.count("a/v"));
  state["a/m"].Fill(0.5f);  // a restore writes in place
  EXPECT_EQ(store->StateTensors().at("a/m")[1], 0.5f);
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
