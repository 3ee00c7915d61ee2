// A click model (dense floats and id lists, embeddings pooled by sum and by mean, concat, a wide
// and a deep part) exported to ONNX with its sparse tables and run by onnxruntime: its logits on
// a batch must be pstrain's own evaluation forward's on the same ids, including padding, an
// example without ids, a repeated id, ids at both ends of the bucket range and ids no batch
// touched (zeros on both sides: the table holds no row for them). The tables are trained a few
// steps first, so that their rows are not their initial values. Skips the onnxruntime checks when
// the venv lacks onnx or onnxruntime.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "common/config.h"
#include "common/data/feature_example.h"
#include "tests/onnx/onnx_test_util.h"
#include "tests/test_env.h"
#include "worker/network/model.h"
#include "worker/training/embedding_tables.h"
#include "worker/training/feature_batch.h"
#include "worker/training/onnx_export.h"
#include "worker/training/onnx_table_rows.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;
using testing::OnnxPython;
using testing::RunCommand;
using testing::WriteFloats;
using worker::EmbeddingTables;
using worker::FeatureBatch;
using worker::FeatureBatcher;
using worker::Model;

constexpr char kClickModel[] = R"(model:
  name: tiny_widedeep
  inputs:
    - {name: dense, shape: [3]}
    - {name: A, shape: [1]}
    - {name: B, shape: [3]}
  layers:
    - {name: wide_A, type: embedding, inputs: A, dimension: 1, rows: 16}
    - {name: wide_B, type: embedding, inputs: B, dimension: 1, rows: 16}
    - {name: deep_A, type: embedding, inputs: A, dimension: 4, rows: 16}
    - {name: deep_B, type: embedding, inputs: B, dimension: 4, rows: 16, combiner: mean}
    - {name: wide, type: concat, inputs: [wide_A, wide_B]}
    - {name: wide_logits, type: fully_connected, units: 2, inputs: wide}
    - {name: deep, type: concat, inputs: [dense, deep_A, deep_B]}
    - {name: deep1, type: fully_connected, units: 8, inputs: deep}
    - {name: deep1_relu, type: relu}
    - {name: deep_logits, type: fully_connected, units: 2}
    - {name: logits, type: add, inputs: [wide_logits, deep_logits]}
    - {name: loss, type: softmax_cross_entropy}
tables:
  optimizer: {type: adagrad}
  learning_rate: {initial: 0.5}
  list:
    - {name: wide_A, dimension: 1, max_rows: 100, initializer: {type: uniform, scale: 0.3}}
    - {name: wide_B, dimension: 1, max_rows: 100, initializer: {type: normal, scale: 0.3}}
    - {name: deep_A, dimension: 4, max_rows: 100, initializer: {type: normal, scale: 0.3}, seed: 7}
    - {name: deep_B, dimension: 4, max_rows: 100, initializer: {type: uniform, scale: 0.3}}
input:
  label: label
  features:
    - {name: dense, type: float, size: 3}
    - {name: A, type: int64, max_length: 1, hash_buckets: 20}
    - {name: B, type: int64, max_length: 3, hash_buckets: 30}
)";

// Ids no training batch below touches.
constexpr int64_t kUntouchedA = 19, kUntouchedB = 29;

FeatureExample Example(std::vector<float> dense, int64_t a, std::vector<int64_t> b, int label) {
  FeatureExample e;
  e.floats = {std::move(dense), {}, {}};
  e.ids = {{}, {a}, std::move(b)};
  e.label = label;
  return e;
}

class ClickModelExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (fs::temp_directory_path() /
            ("pstrain_onnx_click_" + std::to_string(getpid()) + "_" + info->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ASSERT_TRUE(ConfigNode::Parse(kClickModel, "tiny_widedeep.yaml").ok());
    auto model = Model::FromConfig(Section("model"));
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    model_ = std::move(model).value();
    model_->InitVariables(3);
    auto schema = FeatureSchema::FromConfig(Section("input"));
    ASSERT_TRUE(schema.ok()) << schema.status().ToString();
    schema_ = *schema;
    auto batcher = FeatureBatcher::Create(schema_, model_->input_names(), model_->input_shapes());
    ASSERT_TRUE(batcher.ok()) << batcher.status().ToString();
    batcher_ = std::make_unique<FeatureBatcher>(std::move(batcher).value());
    auto tables = EmbeddingTables::Create(Section("tables"), model_.get());
    ASSERT_TRUE(tables.ok()) << tables.status().ToString();
    tables_ = std::move(tables).value();
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  // A section of kClickModel (SetUp checks that it parses).
  static ConfigNode Section(const std::string& name) {
    return ConfigNode::Parse(kClickModel, "tiny_widedeep.yaml").value().Child(name).value();
  }

  FeatureBatch Batch(const std::vector<FeatureExample>& examples) const {
    std::vector<size_t> order(examples.size());
    std::iota(order.begin(), order.end(), 0);
    return batcher_->Make(examples, order, 0, examples.size());
  }

  // A few training steps on random ids (never the untouched ones): the tables' touched rows move
  // away from their first values.
  void TrainTables() {
    std::mt19937_64 rng(5);
    std::uniform_int_distribution<int64_t> a(0, kUntouchedA - 1), b(0, kUntouchedB - 1);
    std::normal_distribution<float> normal;
    for (int64_t step = 1; step <= 4; ++step) {
      std::vector<FeatureExample> examples;
      for (int e = 0; e < 8; ++e) {
        std::vector<int64_t> list(1 + e % 3);
        for (int64_t& id : list) id = b(rng);
        examples.push_back(Example({normal(rng), normal(rng), normal(rng)}, a(rng), list, e % 2));
      }
      const FeatureBatch batch = Batch(examples);
      ASSERT_TRUE(tables_->Gather(batch, step, /*training=*/true).ok());
      std::vector<const Tensor*> inputs;
      for (const Tensor& t : batch.inputs) inputs.push_back(&t);
      model_->Forward(inputs, batch.labels, /*training=*/true, &rng);
      model_->Backward();
      ASSERT_TRUE(tables_->Apply(batch, step).ok());
    }
  }

  std::map<std::string, Tensor> DenseWeights() {
    std::map<std::string, Tensor> weights;
    for (worker::Variable* v : model_->variables()) weights[v->name] = v->value.Clone();
    return weights;
  }

  FeatureSchema schema_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<FeatureBatcher> batcher_;
  std::unique_ptr<EmbeddingTables> tables_;
  std::string dir_;
};

// The batch as a served model gets it: the ids themselves, -1 after a shorter list.
Tensor IdsAsFloats(const std::vector<FeatureExample>& examples, int feature, int64_t width) {
  Tensor t = Tensor::Filled(Shape{static_cast<int64_t>(examples.size()), width}, -1.0f);
  for (size_t e = 0; e < examples.size(); ++e) {
    const std::vector<int64_t>& ids = examples[e].ids[feature];
    for (size_t s = 0; s < ids.size(); ++s) t[e * width + s] = static_cast<float>(ids[s]);
  }
  return t;
}

void WriteInt64s(const std::string& path, const Tensor& ids) {
  std::vector<int64_t> values(ids.size());
  for (int64_t i = 0; i < ids.size(); ++i) values[i] = static_cast<int64_t>(ids[i]);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t));
}

TEST_F(ClickModelExportTest, OnnxruntimeGivesPstrainsLogitsForEveryKindOfIdList) {
  std::string why;
  const std::string python = OnnxPython(&why);
  if (python.empty()) GTEST_SKIP() << why;
  TrainTables();
  const ps::SparseTable* deep_b = tables_->Find("deep_B");
  ASSERT_NE(deep_b, nullptr);
  ASSERT_GT(deep_b->rows(), 5);
  ASSERT_FALSE(deep_b->Contains(kUntouchedB));
  ASSERT_FALSE(tables_->Find("deep_A")->Contains(kUntouchedA));
  // The dense part random too (biases start at zero).
  std::mt19937_64 rng(8);
  std::uniform_real_distribution<float> centered(-0.5f, 0.5f);
  for (worker::Variable* v : model_->variables()) {
    if (v->name.find("/bias") == std::string::npos) continue;
    for (int64_t i = 0; i < v->value.size(); ++i) v->value[i] = centered(rng);
  }

  OnnxExportOptions options;
  const Status written = WriteOnnx(Section("model"), DenseWeights(), options, Path("model.onnx"),
                                   worker::OnnxTableRowsOf(*tables_, schema_));
  ASSERT_TRUE(written.ok()) << written.ToString();

  // Sum and mean over full lists, padded lists, no ids at all, a repeated id, the bucket range's
  // ends, and ids no batch touched.
  const std::vector<FeatureExample> examples = {
      Example({0.5f, -1.0f, 2.0f}, 3, {4, 11, 7}, 0),
      Example({-0.3f, 0.8f, 0.1f}, kUntouchedA, {5}, 1),
      Example({1.2f, 0.0f, -0.7f}, 0, {}, 0),
      Example({0.0f, 0.4f, 0.9f}, 7, {3, 3, 8}, 1),
      Example({-1.1f, 0.2f, 0.3f}, 12, {kUntouchedB, 0, 2}, 0),
      Example({0.6f, -0.6f, 0.0f}, kUntouchedA, {kUntouchedB, 9}, 1),
  };
  const FeatureBatch batch = Batch(examples);
  // pstrain's evaluation reads the rows as they are: zeros for the untouched ids.
  ASSERT_TRUE(tables_->Gather(batch, 5, /*training=*/false).ok());
  std::vector<const Tensor*> inputs;
  for (const Tensor& t : batch.inputs) inputs.push_back(&t);
  model_->Forward(inputs, batch.labels, /*training=*/false, &rng);

  const int64_t n = static_cast<int64_t>(examples.size());
  WriteFloats(Path("dense.f32"), batch.inputs[0]);
  WriteInt64s(Path("A.i64"), IdsAsFloats(examples, 1, 1));
  // A negative id other than -1 (a caller's bug) must read as padding, not a row counted from
  // the table's end: one padding slot of B goes in as the id that, shifted by one, would count
  // back to a row both of B's tables hold (table [1 + 30 buckets, D]: index id + 1 + 31).
  int64_t held = 0;
  while (held < 30 &&
         !(tables_->Find("wide_B")->Contains(held) && tables_->Find("deep_B")->Contains(held))) {
    ++held;
  }
  ASSERT_LT(held, 30) << "no id of B is held by both its tables";
  Tensor b_ids = IdsAsFloats(examples, 2, 3);
  const int64_t padding = static_cast<int64_t>(
      std::find(b_ids.data(), b_ids.data() + b_ids.size(), -1.0f) - b_ids.data());
  ASSERT_LT(padding, b_ids.size());
  b_ids[padding] = static_cast<float>(held - 31);
  WriteInt64s(Path("B.i64"), b_ids);
  WriteFloats(Path("logits.f32"), model_->logits());
  const nlohmann::json spec = {
      {"inputs",
       {{"dense", {{"path", Path("dense.f32")}, {"dtype", "float32"}, {"shape", {n, 3}}}},
        {"A", {{"path", Path("A.i64")}, {"dtype", "int64"}, {"shape", {n, 1}}}},
        {"B", {{"path", Path("B.i64")}, {"dtype", "int64"}, {"shape", {n, 3}}}}}},
      {"logits", {{"path", Path("logits.f32")}, {"shape", {n, 2}}}}};
  std::ofstream(Path("spec.json")) << spec.dump();

  int code = 0;
  const std::string out =
      RunCommand("'" + python + "' '" + testing::SourceDir() + "/tests/onnx/run_onnx_inputs.py' '" +
                     Path("model.onnx") + "' '" + Path("spec.json") + "'",
                 &code);
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json report = nlohmann::json::parse(out.substr(out.find("{\"checker\"")));
  std::printf("%s\n", report.dump().c_str());
  EXPECT_EQ(report["opset"][0], 13);
  constexpr int kFloat = 1, kInt64 = 7;  // ONNX's element types
  EXPECT_EQ(report["inputs"]["dense"], nlohmann::json({{"elem_type", kFloat}, {"dims", {"N", 3}}}));
  EXPECT_EQ(report["inputs"]["A"], nlohmann::json({{"elem_type", kInt64}, {"dims", {"N", 1}}}));
  EXPECT_EQ(report["inputs"]["B"], nlohmann::json({{"elem_type", kInt64}, {"dims", {"N", 3}}}));
  EXPECT_EQ(report["inputs"].size(), 3u) << "the tables are initializers, not inputs";
  EXPECT_EQ(report["outputs"]["logits"], nlohmann::json({"N", 2}));
  const auto ops = report["ops"].get<std::vector<std::string>>();
  for (const std::string op : {"Gather", "ReduceSum", "Concat", "Div"}) {
    EXPECT_NE(std::find(ops.begin(), ops.end(), op), ops.end()) << op;
  }
  EXPECT_GT(report["logit_scale"].get<double>(), 0.1);
  EXPECT_LT(report["max_abs"].get<double>(), 1e-5) << report.dump();
}

TEST_F(ClickModelExportTest, UntouchedRowsAreZerosAsEvaluationReadsThemAndTouchedOnesAsHeld) {
  TrainTables();
  const ps::SparseTable& table = *tables_->Find("deep_B");
  const Tensor rows = worker::DenseTableRows(table, 30);
  ASSERT_EQ(rows.shape(), (Shape{30, 4}));
  int held = 0;
  for (int64_t id = 0; id < 30; ++id) {
    const float* want = table.Row(id);
    if (want != nullptr) ++held;
    for (int64_t k = 0; k < 4; ++k) {
      EXPECT_EQ(rows[id * 4 + k], want != nullptr ? want[k] : 0.0f) << "id " << id;
    }
  }
  EXPECT_GT(held, 5);
  EXPECT_LT(held, 30);
  EXPECT_FALSE(table.Contains(kUntouchedB)) << "reading rows creates none";
}

TEST_F(ClickModelExportTest, AnExportWithoutTablesOrBucketsFailsNamingTheLayerAndInput) {
  auto exported = ExportOnnx(Section("model"), DenseWeights(), OnnxExportOptions{});
  ASSERT_FALSE(exported.ok());
  std::string message = exported.status().ToString();
  EXPECT_NE(message.find("layer 'wide_A' (embedding)"), std::string::npos) << message;
  EXPECT_NE(message.find("id input 'A'"), std::string::npos) << message;
  EXPECT_NE(message.find("tiny_widedeep.yaml: model.layers[0]"), std::string::npos) << message;

  OnnxTableRows tables = worker::OnnxTableRowsOf(*tables_, schema_);
  tables.rows = [](const std::string&, int64_t n) -> Result<Tensor> { return Tensor(Shape{n, 2}); };
  exported = ExportOnnx(Section("model"), DenseWeights(), OnnxExportOptions{}, tables);
  ASSERT_FALSE(exported.ok());
  message = exported.status().ToString();
  EXPECT_NE(message.find("table 'wide_A' gave rows [20,2], the layer reads [20,1]"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace pstrain
