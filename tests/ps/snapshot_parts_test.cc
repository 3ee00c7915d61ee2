// A joiner's copy is sorted into values, optimizer slots and table rows, and refused whole when
// it does not fit the shard (ps/snapshot_parts.h).
#include "ps/snapshot_parts.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/wire/chain_link.h"
#include "tests/ps/sgd_store.h"

namespace pstrain {
namespace ps {
namespace {

using wire::NamedTensor;

const std::vector<std::string> kMomentum = {"momentum"};

std::vector<NamedTensor> Copy() {
  return {{"w", Tensor::Filled(Shape{4}, 1.0f)},
          {"w/momentum", Tensor::Filled(Shape{4}, 2.0f)},
          {"tables/C1/rows", Tensor::Filled(Shape{2}, 3.0f)}};
}

TEST(SnapshotPartsTest, SortsValuesSlotsAndRows) {
  Result<SnapshotParts> parts = SplitSnapshot(Copy(), kMomentum, true, nullptr);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  ASSERT_EQ(parts->values.size(), 1u);
  EXPECT_EQ(parts->values.count("w"), 1u);
  ASSERT_EQ(parts->slots.size(), 1u);
  EXPECT_EQ(parts->slots.count("w/momentum"), 1u);
  ASSERT_EQ(parts->rows.size(), 1u);
  EXPECT_EQ(parts->rows.count("tables/C1/rows"), 1u);
}

TEST(SnapshotPartsTest, RefusesRowsWithoutTablesANameTwiceAndAMissingSlot) {
  EXPECT_EQ(SplitSnapshot(Copy(), kMomentum, false, nullptr).status().code(),
            StatusCode::kFailedPrecondition);
  std::vector<NamedTensor> twice = Copy();
  twice.push_back({"w", Tensor::Filled(Shape{4}, 1.0f)});
  EXPECT_NE(SplitSnapshot(twice, kMomentum, true, nullptr).status().message().find("'w' twice"),
            std::string::npos);
  std::vector<NamedTensor> no_slot = {{"w", Tensor::Filled(Shape{4}, 1.0f)}};
  EXPECT_NE(SplitSnapshot(no_slot, kMomentum, true, nullptr)
                .status()
                .message()
                .find("the copy lacks slot 'w/momentum'"),
            std::string::npos);
}

TEST(SnapshotPartsTest, AnInitialisedShardTakesOnlyItsOwnVariables) {
  auto store = SgdStoreWithWAndMean();  // w [4] and bn/mean [2], no slots
  std::vector<NamedTensor> same = {{"w", Tensor::Filled(Shape{4}, 1.0f)},
                                   {"bn/mean", Tensor::Filled(Shape{2}, 1.0f)}};
  EXPECT_TRUE(SplitSnapshot(same, {}, false, store.get()).ok());
  std::vector<NamedTensor> fewer = {{"w", Tensor::Filled(Shape{4}, 1.0f)}};
  EXPECT_EQ(SplitSnapshot(fewer, {}, false, store.get()).status().code(),
            StatusCode::kFailedPrecondition);
  std::vector<NamedTensor> reshaped = {{"w", Tensor::Filled(Shape{2}, 1.0f)},
                                       {"bn/mean", Tensor::Filled(Shape{2}, 1.0f)}};
  EXPECT_EQ(SplitSnapshot(reshaped, {}, false, store.get()).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST(SnapshotPartsTest, ThePlaceMustBeAPushsStepAndRecordWithAWholeLink) {
  wire::Message copy;
  copy.link = std::string(wire::kChainLinkBytes, 'l');
  copy.value = 7;
  copy.sequence = 3;
  EXPECT_TRUE(CheckSnapshotPlace(copy).ok());
  copy.value = -1;
  EXPECT_EQ(CheckSnapshotPlace(copy).code(), StatusCode::kInvalidArgument);
  copy.value = 7;
  copy.link.pop_back();
  EXPECT_EQ(CheckSnapshotPlace(copy).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
