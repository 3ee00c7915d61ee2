// What a replica needs from the store (docs/replication.md): a backup that applies the
// gradients its head prepared ends with the head's bits, values and optimizer slots alike,
// whatever either's thread count, for every optimizer and server-side clipping; and preparing
// never writes into the gradient it was given (a received frame may be forwarded meanwhile).
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ps/parallel.h"
#include "ps/variable_store.h"

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

Tensor Random(const Shape& shape, std::mt19937* rng, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  Tensor t = Tensor::Uninitialized(shape);
  for (int64_t i = 0; i < t.size(); ++i) t.data()[i] = normal(*rng);
  return t;
}

// The index of the first element where `a` and `b` differ in their bits, or -1.
int64_t FirstDifference(const Tensor& a, const Tensor& b) {
  if (a.size() != b.size()) return 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(a.data() + i, b.data() + i, sizeof(float)) != 0) return i;
  }
  return -1;
}

struct ReplicaCase {
  const char* name;
  const char* optimizer;
};

class ReplicaTest : public ::testing::TestWithParam<std::tuple<ReplicaCase, const char*>> {};

TEST_P(ReplicaTest, ABackupApplyingThePreparedGradientsEndsBitwiseEqualToItsHead) {
  const auto& [opt, clipping] = GetParam();
  const std::string yaml = std::string("{optimizer: ") + opt.optimizer +
                           ", learning_rate: {schedule: exponential_decay, initial: 0.01, "
                           "decay_steps: 7, decay_rate: 0.9}" +
                           (*clipping ? std::string(", clipping: ") + clipping : "") + "}";
  auto head = MakeStore(yaml);
  auto backup = MakeStore(yaml);
  std::mt19937 rng(7);
  // One variable above the parallel threshold (the head splits it over threads) and one below.
  const std::vector<std::pair<std::string, Shape>> vars = {
      {"big", Shape{3 * kMinParallelElements + 17}}, {"bias", Shape{33}}};
  for (const auto& [name, shape] : vars) {
    Tensor init = Random(shape, &rng, 1.0f);
    ASSERT_TRUE(head->AddVariable(name, init.Clone()).ok());
    ASSERT_TRUE(backup->AddVariable(name, init.Clone()).ok());
  }
  const int threads = omp_get_max_threads();
  for (int64_t step = 0; step < 40; ++step) {
    VariableStore::NamedTensors grads;
    for (const auto& [name, shape] : vars) grads.emplace_back(name, Random(shape, &rng, 3.0f));
    omp_set_num_threads(4);
    Result<VariableStore::NamedTensors> prepared = head->PrepareGradients(grads);
    ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
    ASSERT_TRUE(head->ApplyPrepared(step, *prepared).ok());
    omp_set_num_threads(1);
    ASSERT_TRUE(backup->ApplyPrepared(step, *prepared).ok());
  }
  omp_set_num_threads(threads);
  const auto head_state = head->StateTensors(), backup_state = backup->StateTensors();
  ASSERT_EQ(head_state.size(), backup_state.size());
  ASSERT_GE(head_state.size(), vars.size());  // the values, and each optimizer's slots
  for (const auto& [name, t] : head_state) {
    ASSERT_TRUE(backup_state.count(name)) << name;
    EXPECT_EQ(FirstDifference(t, backup_state.at(name)), -1)
        << name << " differs between head and backup";
  }
}

INSTANTIATE_TEST_SUITE_P(
    OptimizersAndClipping, ReplicaTest,
    ::testing::Combine(
        ::testing::Values(ReplicaCase{"Sgd", "{type: sgd}"},
                          ReplicaCase{"Momentum", "{type: momentum, nesterov: true}"},
                          ReplicaCase{"Adam", "{type: adam}"},
                          ReplicaCase{"Adagrad", "{type: adagrad}"},
                          ReplicaCase{"RMSProp", "{type: rmsprop, momentum: 0.5, centered: true}"}),
        ::testing::Values("", "{by_value: [-1, 1]}", "{by_norm: 5.0}")),
    [](const auto& info) {
      const std::string clip = std::get<1>(info.param);
      return std::string(std::get<0>(info.param).name) + (clip.empty() ? ""
                                                          : clip.find("value") != std::string::npos
                                                              ? "ByValue"
                                                              : "ByNorm");
    });

TEST(ReplicaPrepareTest, ClippingNeverWritesIntoTheGradientItWasGiven) {
  auto store = MakeStore(
      "{optimizer: {type: sgd}, learning_rate: {initial: 1.0}, "
      "clipping: {by_value: [-1, 1], by_norm: 1.0}}");
  ASSERT_TRUE(store->AddVariable("w", Tensor::Filled(Shape{2}, 0.0f)).ok());
  const Tensor received = Tensor::FromVector(Shape{2}, {3.0f, -4.0f});
  Result<VariableStore::NamedTensors> prepared = store->PrepareGradients({{"w", received}});
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  EXPECT_FLOAT_EQ(received[0], 3.0f) << "the received bytes were clipped in place";
  EXPECT_FLOAT_EQ(received[1], -4.0f);
  const Tensor& g = prepared->at(0).second;
  EXPECT_NE(g.data(), received.data());
  EXPECT_NEAR(g[0], 1.0f / std::sqrt(2.0f), 1e-6);  // by value to [-1, 1], then to norm 1
  EXPECT_NEAR(g[1], -1.0f / std::sqrt(2.0f), 1e-6);
}

TEST(ReplicaPrepareTest, WithoutClippingThePreparedGradientsShareTheGivenBuffers) {
  auto store = MakeStore("{optimizer: {type: sgd}, learning_rate: {initial: 1.0}}");
  ASSERT_TRUE(store->AddVariable("w", Tensor::Filled(Shape{2}, 0.0f)).ok());
  const Tensor received = Tensor::FromVector(Shape{2}, {3.0f, -4.0f});
  Result<VariableStore::NamedTensors> prepared = store->PrepareGradients({{"w", received}});
  ASSERT_TRUE(prepared.ok());
  EXPECT_EQ(prepared->at(0).second.data(), received.data()) << "no copy when nothing is clipped";
  // And a bad gradient is refused before anything is prepared.
  Result<VariableStore::NamedTensors> bad =
      store->PrepareGradients({{"w", Tensor::FromVector(Shape{3}, {1, 2, 3})}});
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("has shape"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
