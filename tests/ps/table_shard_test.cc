// A server's rows of the embedding tables: only the ids it owns, updated by the tables'
// optimizer (Adagrad here, its formula written out in double), refusals that change nothing,
// and a full table named with its server.
#include "ps/table_shard.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/row_owner.h"

namespace pstrain::ps {
namespace {

constexpr int kServers = 2;
constexpr int64_t kDim = 3;

std::unique_ptr<TableShard> Shard(int server, int64_t max_table_rows = 0) {
  auto node = ConfigNode::Parse(
      "optimizer: {type: adagrad, initial_accumulator_value: 0.1}\n"
      "learning_rate: {initial: 0.5}\n"
      "list:\n"
      "  - {name: C1, dimension: 3, max_rows: 100, initializer: {type: uniform, scale: 0.1}}\n",
      "tables.yaml");
  EXPECT_TRUE(node.ok()) << node.status().ToString();
  auto shard = TableShard::FromConfig(*node, max_table_rows, {server, kServers, 0});
  EXPECT_TRUE(shard.ok()) << shard.status().ToString();
  return std::move(shard).value();
}

// The first `n` ids from 0 up that `server` owns in table C1.
std::vector<int64_t> OwnedIds(int server, int n) {
  std::vector<int64_t> ids;
  for (int64_t id = 0; static_cast<int>(ids.size()) < n; ++id) {
    if (RowOwner("C1", id, kServers) == server) ids.push_back(id);
  }
  return ids;
}

std::vector<float> Row(const TableShard& shard, int64_t id) {
  const float* row = shard.Find("C1")->Row(id);
  EXPECT_NE(row, nullptr) << "id " << id;
  return row ? std::vector<float>(row, row + kDim) : std::vector<float>();
}

TEST(TableShardTest, APushMovesTheOwnedRowsByAdagradsFormula) {
  auto shard = Shard(0);
  const std::vector<int64_t> ids = OwnedIds(0, 2);
  Tensor before = shard->Pull("C1", ids, 0, /*training=*/true).value();
  const Tensor grads = Tensor::FromVector(Shape{2, kDim}, {0.5f, -1.0f, 2.0f, 0.0f, 0.25f, -3.0f});
  ASSERT_TRUE(shard->Push("worker 0", "C1", ids, grads, 0).ok());
  Tensor after = shard->Pull("C1", ids, 1, true).value();
  for (int64_t i = 0; i < after.size(); ++i) {
    const double g = grads[i];
    const double want = before[i] - 0.5 * g / std::sqrt(0.1 + g * g);
    EXPECT_NEAR(after[i], want, 1e-6) << "element " << i;
    if (g != 0) {
      EXPECT_NE(after[i], before[i]) << "element " << i << " did not move";
    }
  }
}

TEST(TableShardTest, AnIdAnotherServerOwnsIsRefusedNamingItAndChangesNothing) {
  auto shard = Shard(0);
  const int64_t theirs = OwnedIds(1, 1)[0];
  Result<Tensor> pulled = shard->Pull("C1", {OwnedIds(0, 1)[0], theirs}, 0, true);
  ASSERT_FALSE(pulled.ok());
  const std::string& why = pulled.status().message();
  EXPECT_NE(why.find("table 'C1': id " + std::to_string(theirs)), std::string::npos) << why;
  EXPECT_NE(why.find("belongs to ps 1, not to ps 0"), std::string::npos) << why;
  EXPECT_EQ(shard->rows(), 0) << "a refused pull created rows";
  Status pushed = shard->Push("worker 0", "C1", {theirs}, Tensor(Shape{1, kDim}), 0);
  EXPECT_EQ(pushed.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(shard->Find("C1")->Contains(theirs), false);
}

TEST(TableShardTest, BadGradientsAreRefusedAndNoRowMoves) {
  auto shard = Shard(1);
  const std::vector<int64_t> ids = OwnedIds(1, 2);
  ASSERT_TRUE(shard->Pull("C1", ids, 0, true).ok());
  const std::vector<float> row0 = Row(*shard, ids[0]);
  Tensor nan = Tensor::Filled(Shape{2, kDim}, 1.0f);
  nan[4] = std::nanf("");
  EXPECT_FALSE(shard->Push("worker 0", "C1", ids, nan, 0).ok());
  EXPECT_FALSE(shard->Push("worker 0", "C1", ids, Tensor(Shape{2, kDim + 1}), 0).ok());
  EXPECT_FALSE(shard->Push("worker 0", "C1", {ids[0], -4}, Tensor(Shape{2, kDim}), 0).ok());
  Status unknown = shard->Push("worker 0", "C9", ids, Tensor(Shape{2, kDim}), 0);
  EXPECT_EQ(unknown.code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.message().find("no table 'C9'; its tables are C1"), std::string::npos)
      << unknown.message();
  EXPECT_EQ(Row(*shard, ids[0]), row0);
}

TEST(TableShardTest, AFullTableIsAnErrorNamingTheTableAndTheServer) {
  auto shard = Shard(1, /*max_table_rows=*/3);
  const std::vector<int64_t> ids = OwnedIds(1, 4);
  ASSERT_TRUE(shard->Pull("C1", {ids[0], ids[1]}, 0, true).ok());
  Result<Tensor> more = shard->Pull("C1", {ids[2], ids[3]}, 1, true);
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(more.status().message().find("ps 1"), std::string::npos) << more.status().message();
  EXPECT_NE(more.status().message().find("table 'C1' is full"), std::string::npos);
  EXPECT_EQ(shard->rows(), 2) << "a refused pull created rows";
}

TEST(TableShardTest, APullOfMoreIdsThanTheTableHoldsIsRefusedBeforeAnyReplyIsMade) {
  auto shard = Shard(0, /*max_table_rows=*/4);
  const std::vector<int64_t> many(5, OwnedIds(0, 1)[0]);
  for (bool training : {true, false}) {
    Result<Tensor> rows = shard->Pull("C1", many, 0, training);
    ASSERT_FALSE(rows.ok());
    EXPECT_NE(rows.status().message().find("a pull of 5 ids, more than its max_rows 4 on ps 0"),
              std::string::npos)
        << rows.status().message();
  }
  EXPECT_EQ(shard->rows(), 0);
}

TEST(TableShardTest, AnEvaluatorsPullReadsWithoutCreatingRows) {
  auto shard = Shard(0);
  Tensor rows = shard->Pull("C1", OwnedIds(0, 3), 0, /*training=*/false).value();
  EXPECT_EQ(rows.shape(), (Shape{3, kDim}));
  for (int64_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i], 0.0f);
  EXPECT_EQ(shard->rows(), 0);
}

TEST(TableShardTest, ARetriedPushIsKnownByItsSenderIncarnationAndSequence) {
  auto shard = Shard(0);
  EXPECT_FALSE(shard->Applied("worker 0", 7, 1));
  shard->NoteApplied("worker 0", 7, 1);
  EXPECT_TRUE(shard->Applied("worker 0", 7, 1));
  EXPECT_FALSE(shard->Applied("worker 0", 7, 2));
  EXPECT_FALSE(shard->Applied("worker 0", 8, 1)) << "a restarted process starts again";
  EXPECT_FALSE(shard->Applied("worker 1", 7, 1));
}

}  // namespace
}  // namespace pstrain::ps
