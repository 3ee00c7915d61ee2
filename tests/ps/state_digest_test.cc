// StateCrc32c: what replicas compare at shutdown must see every value and slot bit, and nothing
// but the state (not the order variables were added in).
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

}  // namespace
}  // namespace ps
}  // namespace pstrain
