// StateCrc32c and StateBlake2b: what replicas compare at shutdown, and what a head stamps for a
// joiner, must see every value and slot bit and the step, and nothing but the state (not the
// order variables were added in).
#include "ps/state_digest.h"

#include <gtest/gtest.h>

#include <cstring>

#include "common/config.h"

namespace pstrain {
namespace ps {
namespace {

std::unique_ptr<VariableStore> MakeStore() {
  auto node =
      ConfigNode::Parse("{optimizer: {type: adam}, learning_rate: {initial: 0.01}}", "train.yaml");
  EXPECT_TRUE(node.ok()) << node.status().ToString();
  auto store = VariableStore::FromConfig(node.value());
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return std::move(store).value();
}

Tensor Filled(const Shape& shape, float v) {
  Tensor t = Tensor::Uninitialized(shape);
  for (int64_t i = 0; i < t.size(); ++i) t.data()[i] = v + 0.25f * static_cast<float>(i);
  return t;
}

TEST(StateDigestTest, StoresWithTheSameStateHaveTheSameDigestWhateverTheOrderOfAdding) {
  auto a = MakeStore(), b = MakeStore();
  ASSERT_TRUE(a->AddVariable("w", Filled(Shape({3, 2}), 1.0f)).ok());
  ASSERT_TRUE(a->AddVariable("b", Filled(Shape({2}), -1.0f)).ok());
  ASSERT_TRUE(b->AddVariable("b", Filled(Shape({2}), -1.0f)).ok());
  ASSERT_TRUE(b->AddVariable("w", Filled(Shape({3, 2}), 1.0f)).ok());
  EXPECT_EQ(StateCrc32c(*a), StateCrc32c(*b));
}

TEST(StateDigestTest, OneFlippedBitOfAnOptimizerSlotChangesTheDigest) {
  auto a = MakeStore(), b = MakeStore();
  for (auto* s : {a.get(), b.get()})
    ASSERT_TRUE(s->AddVariable("w", Filled(Shape({4}), 0.5f)).ok());
  const uint32_t before = StateCrc32c(*a);
  ASSERT_EQ(before, StateCrc32c(*b));
  auto state = b->StateTensors();
  ASSERT_GT(state.size(), 1u) << "Adam keeps slots beside the value";
  for (auto& [name, t] : state) {
    if (name == "w") continue;  // a slot: "w/m" or "w/v"
    uint32_t bits;
    std::memcpy(&bits, t.data(), sizeof bits);
    bits ^= 1u;
    std::memcpy(t.data(), &bits, sizeof bits);
    break;
  }
  EXPECT_NE(StateCrc32c(*b), before);
  EXPECT_EQ(StateCrc32c(*a), before);
}

TEST(StateDigestTest, ARenamedVariableChangesTheDigest) {
  auto a = MakeStore(), b = MakeStore();
  ASSERT_TRUE(a->AddVariable("w1", Filled(Shape({4}), 0.5f)).ok());
  ASSERT_TRUE(b->AddVariable("w2", Filled(Shape({4}), 0.5f)).ok());
  EXPECT_NE(StateCrc32c(*a), StateCrc32c(*b));
}

TEST(StateDigestTest, TheStampSeesEveryBitAndTheStepButNotTheOrderOfAdding) {
  auto a = MakeStore(), b = MakeStore();
  ASSERT_TRUE(a->AddVariable("w", Filled(Shape({3, 2}), 1.0f)).ok());
  ASSERT_TRUE(a->AddVariable("b", Filled(Shape({2}), -1.0f)).ok());
  ASSERT_TRUE(b->AddVariable("b", Filled(Shape({2}), -1.0f)).ok());
  ASSERT_TRUE(b->AddVariable("w", Filled(Shape({3, 2}), 1.0f)).ok());
  const std::string stamp = StateBlake2b(a->StateTensors(), 7);
  EXPECT_EQ(stamp.size(), 32u);
  EXPECT_EQ(StateBlake2b(b->StateTensors(), 7), stamp);
  EXPECT_NE(StateBlake2b(b->StateTensors(), 8), stamp) << "the step is part of the state";
  auto state = b->StateTensors();
  uint32_t bits;
  std::memcpy(&bits, state.at("b/m").data() + 1, sizeof bits);
  bits ^= 1u << 31;
  std::memcpy(state.at("b/m").data() + 1, &bits, sizeof bits);
  EXPECT_NE(StateBlake2b(b->StateTensors(), 7), stamp) << "a slot's flipped sign bit";
  // Bytes moved from one tensor's end to the next one's start: the same bytes in the same
  // order, another state.
  std::map<std::string, Tensor> one = {{"x", Filled(Shape({3}), 1.0f)}};
  std::map<std::string, Tensor> two = {{"x", Filled(Shape({2}), 1.0f)}};
  two["x/"] = Tensor::Filled(Shape({1}), one["x"].data()[2]);
  one["x/"] = Tensor(Shape({0}));
  EXPECT_NE(StateBlake2b(one, 0), StateBlake2b(two, 0));
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
