// A VariableStore for the push tests: plain SGD at learning rate 1, holding "w" (4 zeros) and
// "bn/mean" (2 zeros), a variable a push may send as a gradient or as a value to assign.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "common/config.h"
#include "ps/variable_store.h"

namespace pstrain {
namespace ps {

inline std::unique_ptr<VariableStore> SgdStoreWithWAndMean() {
  auto config = ConfigNode::Parse("{optimizer: {type: sgd}, learning_rate: {initial: 1.0}}", "t");
  auto store = VariableStore::FromConfig(*config).value();
  EXPECT_TRUE(store->AddVariable("w", Tensor::Filled(Shape{4}, 0.0f)).ok());
  EXPECT_TRUE(store->AddVariable("bn/mean", Tensor::Filled(Shape{2}, 0.0f)).ok());
  return store;
}

}  // namespace ps
}  // namespace pstrain
