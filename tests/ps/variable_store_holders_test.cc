// What other holders of the store's buffers see: with Holders::kKeepTheirBytes (the server) a
// pull reply or a checkpoint keeps the bytes it was given while updates go on, and the values
// are bitwise those of updates in place; with kSeeUpdates (the single-process trainer) a holder
// sees every update (variable_store_test.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "ps/variable_store.h"

namespace pstrain {
namespace ps {
namespace {

using Holders = VariableStore::Holders;
using Checked = VariableStore::Checked;

std::unique_ptr<VariableStore> AdamStore() {
  auto node = ConfigNode::Parse("{optimizer: {type: adam}, learning_rate: {initial: 0.01}}", "t");
  EXPECT_TRUE(node.ok()) << node.status().ToString();
  auto store = VariableStore::FromConfig(node.value());
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return std::move(store).value();
}

// Big enough for the threaded, vectorised loop, with a ragged tail.
constexpr int64_t kN = (int64_t{1} << 16) + 5;

Tensor Wave(float freq) {
  Tensor t(Shape{kN});
  for (int64_t i = 0; i < kN; ++i) t[i] = std::sin(freq * static_cast<float>(i) + 0.1f);
  return t;
}

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

Status Update(VariableStore* store, int64_t step, Holders holders) {
  return store->ApplyGradientsAt(step, {{"w", Wave(0.003f * static_cast<float>(step + 1))}},
                                 Checked::kNo, holders);
}

TEST(VariableStoreHoldersTest, APullReplyKeepsItsValuesAndTheUpdatesMatchUpdatesInPlace) {
  auto held = AdamStore(), alone = AdamStore();
  ASSERT_TRUE(held->AddVariable("w", Wave(0.001f)).ok());
  ASSERT_TRUE(alone->AddVariable("w", Wave(0.001f)).ok());
  for (int64_t step = 0; step < 4; ++step) {
    const Tensor reply = held->Value("w");  // as a pull reply being sent holds it
    const Tensor sent = reply.Clone();
    ASSERT_TRUE(Update(held.get(), step, Holders::kKeepTheirBytes).ok());
    ASSERT_TRUE(Update(alone.get(), step, Holders::kKeepTheirBytes).ok());  // nobody holds it
    EXPECT_TRUE(SameBits(reply, sent)) << "the reply's bytes changed at step " << step;
    EXPECT_FALSE(SameBits(held->Value("w"), sent)) << "no update at step " << step;
    EXPECT_TRUE(SameBits(held->Value("w"), alone->Value("w"))) << "step " << step;
  }
  const auto held_state = held->StateTensors(), alone_state = alone->StateTensors();
  EXPECT_TRUE(SameBits(held_state.at("w/m"), alone_state.at("w/m")));
  EXPECT_TRUE(SameBits(held_state.at("w/v"), alone_state.at("w/v")));
}

TEST(VariableStoreHoldersTest, AVariablesTwoBuffersAreSwappedOnceTheReplyLetsGo) {
  auto store = AdamStore();
  ASSERT_TRUE(store->AddVariable("w", Wave(0.001f)).ok());
  const float* first = store->Value("w").data();
  Tensor reply = store->Value("w");
  ASSERT_TRUE(Update(store.get(), 0, Holders::kKeepTheirBytes).ok());
  const float* second = store->Value("w").data();
  EXPECT_NE(second, first);
  reply = Tensor();  // sent
  reply = store->Value("w");
  ASSERT_TRUE(Update(store.get(), 1, Holders::kKeepTheirBytes).ok());
  EXPECT_EQ(store->Value("w").data(), first) << "the released buffer is written again";
  // A reply that still holds the other buffer keeps it: the update goes to a third.
  Tensor slow = store->Value("w");
  ASSERT_TRUE(Update(store.get(), 2, Holders::kKeepTheirBytes).ok());  // `reply` holds `second`
  const float* third = store->Value("w").data();
  EXPECT_NE(third, first);
  EXPECT_NE(third, second);
  slow = Tensor();
  reply = store->Value("w");
  ASSERT_TRUE(Update(store.get(), 3, Holders::kKeepTheirBytes).ok());
  EXPECT_EQ(store->Value("w").data(), first);
}

TEST(VariableStoreHoldersTest, ACheckpointKeepsTheValueAndSlotsOfItsRequest) {
  auto store = AdamStore();
  ASSERT_TRUE(store->AddVariable("w", Wave(0.001f)).ok());
  ASSERT_TRUE(Update(store.get(), 0, Holders::kKeepTheirBytes).ok());
  const std::map<std::string, Tensor> snapshot = store->StateTensors();  // a save in progress
  std::map<std::string, Tensor> saved;
  for (const auto& [name, t] : snapshot) saved[name] = t.Clone();
  ASSERT_TRUE(Update(store.get(), 1, Holders::kKeepTheirBytes).ok());
  ASSERT_TRUE(Update(store.get(), 2, Holders::kKeepTheirBytes).ok());
  for (const auto& [name, t] : snapshot) {
    EXPECT_TRUE(SameBits(t, saved.at(name))) << name << " changed under the checkpoint";
    EXPECT_FALSE(SameBits(store->StateTensors().at(name), saved.at(name))) << name;
  }
}

TEST(VariableStoreHoldersTest, SeeUpdatesWritesIntoTheBufferEveryHolderShares) {
  auto store = AdamStore();
  Tensor model = Wave(0.001f);  // the single-process trainer's variable
  ASSERT_TRUE(store->AddVariable("w", model).ok());
  const Tensor before = model.Clone();
  ASSERT_TRUE(Update(store.get(), 0, Holders::kSeeUpdates).ok());
  EXPECT_EQ(store->Value("w").data(), model.data());
  EXPECT_FALSE(SameBits(model, before));
}

TEST(VariableStoreHoldersTest, AnAssignLeavesAHeldValueAsItWas) {
  auto store = AdamStore();
  ASSERT_TRUE(store->AddVariable("mean", Tensor::Filled(Shape{4}, 1.0f)).ok());
  const Tensor reply = store->Value("mean");
  store->Assign("mean", Tensor::Filled(Shape{4}, 2.0f));
  EXPECT_EQ(reply[3], 1.0f);
  EXPECT_EQ(store->Value("mean")[3], 2.0f);
  const float* now = store->Value("mean").data();
  store->Assign("mean", Tensor::Filled(Shape{4}, 3.0f));  // nobody else holds it: in place
  EXPECT_EQ(store->Value("mean").data(), now);
  EXPECT_EQ(store->Value("mean")[0], 3.0f);
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
