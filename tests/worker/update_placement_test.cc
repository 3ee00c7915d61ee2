// Where the single-process trainer runs its optimizer (worker/training/update_placement.h):
// on the GPU beside the model unless the run needs what only the host does, and on the host
// always when the model computes on the CPU.
#include "worker/training/update_placement.h"

#include <gtest/gtest.h>

#include "common/config.h"

namespace pstrain {
namespace worker {
namespace {

ps::OptimizerRule RuleOf(const std::string& yaml) {
  auto node = ConfigNode::Parse(yaml, "optimizer");
  EXPECT_TRUE(node.ok()) << node.status().ToString();
  auto opt = ps::Optimizer::FromConfig(node.value());
  EXPECT_TRUE(opt.ok()) << opt.status().ToString();
  return opt.value()->rule();
}

TEST(UpdatePlacementTest, AnOptimizerDescribesItsOwnOptions) {
  const ps::OptimizerRule adam = RuleOf("{type: adam, beta1: 0.5, beta2: 0.75, epsilon: 0.25}");
  EXPECT_EQ(adam.type, "adam");
  EXPECT_EQ(adam.adam.beta1, 0.5f);
  EXPECT_EQ(adam.adam.beta2, 0.75f);
  EXPECT_EQ(adam.adam.epsilon, 0.25f);
  const ps::OptimizerRule rms =
      RuleOf("{type: rmsprop, decay: 0.5, momentum: 0.25, centered: true}");
  EXPECT_EQ(rms.rmsprop.decay, 0.5f);
  EXPECT_EQ(rms.rmsprop.momentum, 0.25f);
  EXPECT_TRUE(rms.rmsprop.centered);
  const ps::OptimizerRule nesterov = RuleOf("{type: momentum, momentum: 0.5, nesterov: true}");
  EXPECT_EQ(nesterov.momentum.momentum, 0.5f);
  EXPECT_TRUE(nesterov.momentum.nesterov);
  EXPECT_EQ(
      RuleOf("{type: adagrad, initial_accumulator_value: 0.5}").adagrad.initial_accumulator_value,
      0.5f);
  EXPECT_EQ(RuleOf("{type: sgd}").type, "sgd");
}

TEST(UpdatePlacementTest, APlainRunUpdatesOnTheGpu) {
  TrainConfig train;
  for (const char* yaml :
       {"{type: sgd}", "{type: momentum}", "{type: adam}", "{type: adagrad}", "{type: rmsprop}"}) {
    EXPECT_EQ(HostOnlyReason(train, RuleOf(yaml), false), "") << yaml;
  }
}

TEST(UpdatePlacementTest, WhatOnlyTheHostDoesKeepsTheUpdateThereNamingWhy) {
  TrainConfig train;
  const ps::OptimizerRule adam = RuleOf("{type: adam}");
  EXPECT_NE(HostOnlyReason(train, adam, true).find("sparse tables"), std::string::npos);
  EXPECT_NE(HostOnlyReason(train, RuleOf("{type: ftrl}"), false).find("ftrl optimizer has no GPU"),
            std::string::npos);
  train.weight_decay = 1e-4;
  EXPECT_NE(HostOnlyReason(train, adam, false).find("weight decay"), std::string::npos);
  train.weight_decay = 0;
  train.clipping.by_global_norm = 5.0f;
  EXPECT_NE(HostOnlyReason(train, adam, false).find("clipping"), std::string::npos);
}

TEST(UpdatePlacementTest, OnTheCpuTheStoreUpdatesAndTheModelKeepsItsCopies) {
  auto train_node = ConfigNode::Parse(
      "{optimizer: {type: adam}, learning_rate: {schedule: constant, initial: 0.1}}", "train");
  ASSERT_TRUE(train_node.ok());
  auto store = ps::VariableStore::FromConfig(train_node.value());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto model_node = ConfigNode::Parse(
      "{name: m, input: [1, 4, 4], layers: [{name: flat, type: flatten}, "
      "{name: fc, type: fully_connected, units: 3}, "
      "{name: loss, type: softmax_cross_entropy}]}",
      "model");
  ASSERT_TRUE(model_node.ok());
  auto model = Model::FromConfig(model_node.value());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto update =
      PlaceUpdate(TrainConfig{}, false, *ComputeDevice::Cpu(), store->get(), model->get());
  ASSERT_TRUE(update.ok()) << update.status().ToString();
  EXPECT_EQ(update->get(), nullptr);
  EXPECT_FALSE((*model)->update_on_device());
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
