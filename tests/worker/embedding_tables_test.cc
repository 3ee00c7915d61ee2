// The one-process path of embedding rows: batches list their distinct ids, the tables fill the
// layers' rows before a step and apply the rows' gradients after it.
#include "worker/training/embedding_tables.h"

#include <gtest/gtest.h>

#include "worker/training/feature_batch.h"

namespace pstrain {
namespace worker {
namespace {

FeatureSchema Schema() {
  FeatureSchema schema;
  schema.features.push_back({"dense", FeatureSpec::Kind::kFloats, 1, 0});
  schema.features.push_back({"ids", FeatureSpec::Kind::kIds, 2, 0});
  return schema;
}

FeatureExample Example(float dense, std::vector<int64_t> ids) {
  FeatureExample e;
  e.floats = {{dense}, {}};
  e.ids = {{}, std::move(ids)};
  return e;
}

std::unique_ptr<Model> TinyModel(int64_t rows) {
  auto node = ConfigNode::Parse(
      "{inputs: [{name: ids, shape: [2]}], layers: [{name: emb, type: embedding, inputs: ids, "
      "dimension: 2, rows: " +
          std::to_string(rows) +
          ", table: t}, {name: fc, type: fully_connected, units: 2}, {name: loss, type: "
          "softmax_cross_entropy}]}",
      "model.yaml");
  auto model = Model::FromConfig(node.value());
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return std::move(model).value();
}

Result<std::unique_ptr<EmbeddingTables>> Tables(Model* model, const std::string& list) {
  auto node = ConfigNode::Parse(
      "{optimizer: {type: sgd}, learning_rate: {initial: 1.0}, list: " + list + "}", "tables");
  return EmbeddingTables::Create(node.value(), model);
}

TEST(FeatureBatchTest, ListsDistinctIdsInFirstSeenOrderAndPadsShortLists) {
  const std::vector<FeatureExample> examples = {Example(0.5f, {9, 4}), Example(1.5f, {4})};
  auto batcher = FeatureBatcher::Create(Schema(), {"ids", "dense"}, {Shape{2}, Shape{1}});
  ASSERT_TRUE(batcher.ok()) << batcher.status().ToString();
  const FeatureBatch batch = batcher->Make(examples, {1, 0}, 0, 2);
  EXPECT_EQ(batch.ids[0], (std::vector<int64_t>{4, 9}));
  EXPECT_EQ(batch.inputs[0].ToVector(), (std::vector<float>{0, -1, 1, 0}));
  EXPECT_EQ(batch.inputs[1].ToVector(), (std::vector<float>{1.5f, 0.5f}));
  EXPECT_TRUE(batch.ids[1].empty());
}

TEST(FeatureBatchTest, AnInputWithoutItsFeatureOrOfAnotherSizeIsNamed) {
  auto missing = FeatureBatcher::Create(Schema(), {"C7"}, {Shape{1}});
  EXPECT_NE(missing.status().message().find("model input 'C7' is not a feature"),
            std::string::npos);
  auto size = FeatureBatcher::Create(Schema(), {"ids"}, {Shape{3}});
  EXPECT_NE(size.status().message().find("feature 'ids' has max_length 2"), std::string::npos)
      << size.status().ToString();
}

TEST(EmbeddingTablesTest, RowsAreGatheredBeforeAStepAndOnlyTheBatchsIdsUpdatedAfter) {
  auto model = TinyModel(4);
  model->InitVariables(1);
  auto tables = Tables(model.get(), "[{name: t, dimension: 2, max_rows: 10}]");
  ASSERT_TRUE(tables.ok()) << tables.status().ToString();
  Variable* rows = model->FindVariable("emb/rows");
  EXPECT_TRUE((*tables)->Holds(rows));
  EXPECT_FALSE((*tables)->Holds(model->FindVariable("fc/weights")));
  auto batcher = FeatureBatcher::Create(Schema(), {"ids"}, {Shape{2}}).value();
  const std::vector<FeatureExample> first = {Example(0, {3, 5})}, second = {Example(0, {5, 8})};
  const FeatureBatch a = batcher.Make(first, {0}, 0, 1), b = batcher.Make(second, {0}, 0, 1);
  ASSERT_TRUE((*tables)->Gather(a, 0, true).ok());
  const std::vector<float> row5 = {rows->value[2], rows->value[3]};
  EXPECT_EQ(rows->value[4], 0.0f);  // rows past the batch's two ids are zero
  rows->grad.Fill(0.0f);
  rows->grad[2] = 1.0f;  // id 5's row, the batch's second
  ASSERT_TRUE((*tables)->Apply(a, 0).ok());
  ASSERT_TRUE((*tables)->Gather(b, 1, true).ok());  // id 5 is now the first row
  EXPECT_EQ(rows->value[0], row5[0] - 1.0f);
  EXPECT_EQ(rows->value[1], row5[1]);
  EXPECT_EQ((*tables)->Summary(), "3 rows in 1 tables");
}

TEST(EmbeddingTablesTest, MoreDistinctIdsThanTheLayersRowsIsAnErrorNamingIt) {
  auto model = TinyModel(1);
  auto tables = Tables(model.get(), "[{name: t, dimension: 2, max_rows: 10}]");
  ASSERT_TRUE(tables.ok());
  auto batcher = FeatureBatcher::Create(Schema(), {"ids"}, {Shape{2}}).value();
  const std::vector<FeatureExample> examples = {Example(0, {3, 5})};
  Status s = (*tables)->Gather(batcher.Make(examples, {0}, 0, 1), 0, true);
  EXPECT_NE(s.message().find("layer 'emb' (embedding): the batch has 2 distinct ids, more than "
                             "its rows 1"),
            std::string::npos)
      << s.ToString();
}

TEST(EmbeddingTablesTest, ALayerWithoutItsTableOrOfAnotherDimensionIsNamed) {
  auto model = TinyModel(4);
  auto unknown = Tables(model.get(), "[{name: other, dimension: 2, max_rows: 10}]");
  EXPECT_NE(unknown.status().message().find("names table 't', which 'list' does not hold"),
            std::string::npos)
      << unknown.status().ToString();
  auto dimension = Tables(model.get(), "[{name: t, dimension: 3, max_rows: 10}]");
  EXPECT_NE(dimension.status().message().find("has dimension 2 but table 't' has 3"),
            std::string::npos)
      << dimension.status().ToString();
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
