#include "worker/network/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>

#include "tests/test_env.h"
#include "tests/worker/gradient_checker.h"

namespace pstrain {
namespace worker {
namespace {

using pstrain::testing::SourceDir;

Result<std::unique_ptr<Model>> FromText(const std::string& yaml) {
  auto node = ConfigNode::Parse(yaml, "model.yaml");
  if (!node.ok()) return node.status();
  return Model::FromConfig(node.value());
}

std::unique_ptr<Model> LoadConfigFile(const std::string& name) {
  auto model = Model::FromConfigFile(SourceDir() + "/configs/" + name);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return std::move(model).value();
}

TEST(ModelTest, AConfigFileWithoutAModelOrMissingIsNamed) {
  auto missing = Model::FromConfigFile("/nonexistent/pstrain.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/pstrain.yaml"), std::string::npos)
      << missing.status().message();
  const std::string path = ::testing::TempDir() + "/no_model.yaml";
  {
    std::ofstream f(path);
    f << "train: {batch_size: 8}\n";
  }
  auto no_model = Model::FromConfigFile(path);
  ASSERT_FALSE(no_model.ok());
  EXPECT_NE(no_model.status().message().find(path), std::string::npos)
      << no_model.status().message();
  EXPECT_NE(no_model.status().message().find("model"), std::string::npos)
      << no_model.status().message();
}

TEST(ModelTest, RefNetHasThePyTorchReferenceParameterCount) {
  auto model = LoadConfigFile("refnet.yaml");
  // 832 + 51,264 + 3,212,288 + 10,250, as torch_refnet.py's RefNet.
  EXPECT_EQ(model->num_parameters(), 3274634);
  EXPECT_EQ(model->num_classes(), 10);
  EXPECT_NE(model->Summary().find("pool2 (max_pool) -> [64,7,7]"), std::string::npos)
      << model->Summary();
}

TEST(ModelTest, ResNet20LoadsAndRuns) {
  auto model = LoadConfigFile("resnet20.yaml");
  EXPECT_GT(model->num_parameters(), 250000);
  EXPECT_LT(model->num_parameters(), 300000);
  model->InitVariables(1);
  std::mt19937_64 rng(1);
  Tensor x = testing::RandomTensor(Shape{4, 1, 28, 28}, &rng);
  float loss = model->Forward(x, {0, 1, 2, 3}, true, &rng);
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_NEAR(loss, std::log(10.0f), 1.5f);
  model->Backward();
  EXPECT_NE(model->FindVariable("conv0/weights")->grad[0], 0.0f);
}

TEST(ModelTest, ResNet50HasTorchvisionsParameterCountAndShapes) {
  // What bench/run.sh gpu times against bench/torch_gpu_ref.py's ResNet-50 (and torchvision's).
  auto model = LoadConfigFile("resnet50.yaml");
  EXPECT_EQ(model->num_parameters(), 25557032);
  EXPECT_EQ(model->num_classes(), 1000);
  const std::string summary = model->Summary();
  EXPECT_NE(summary.find("pool1 (max_pool) -> [64,56,56]"), std::string::npos) << summary;
  EXPECT_NE(summary.find("s4b3_relu3 (relu) -> [2048,7,7]"), std::string::npos) << summary;
}

TEST(ModelTest, UnknownLayerTypeListsTheKnownTypes) {
  auto r = FromText(
      "{input: [1, 8, 8], layers: [{name: c1, type: convolution}, "
      "{name: loss, type: softmax_cross_entropy}]}");
  ASSERT_FALSE(r.ok());
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("model.yaml: layers[0]"), std::string::npos) << m;
  EXPECT_NE(m.find("unknown layer type 'convolution'"), std::string::npos) << m;
  EXPECT_NE(m.find("conv2d"), std::string::npos) << m;
}

TEST(ModelTest, MissingFieldNamesTheLayerAndTheField) {
  auto r = FromText(
      "{input: [1, 8, 8], layers: [{name: c1, type: conv2d, kernel: 3}, "
      "{name: loss, type: softmax_cross_entropy}]}");
  ASSERT_FALSE(r.ok());
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("layer 'c1' (conv2d)"), std::string::npos) << m;
  EXPECT_NE(m.find("missing field 'filters'"), std::string::npos) << m;
}

TEST(ModelTest, MismatchedShapesNameTheLayerAndBothShapes) {
  auto r = FromText(
      "{input: [1, 8, 8], layers: ["
      "{name: a, type: conv2d, filters: 4, kernel: 3},"
      "{name: b, type: conv2d, filters: 4, kernel: 3, stride: 2},"
      "{name: sum, type: add, inputs: [a, b]},"
      "{name: loss, type: softmax_cross_entropy}]}");
  ASSERT_FALSE(r.ok());
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("layer 'sum' (add)"), std::string::npos) << m;
  EXPECT_NE(m.find("[4,8,8] and [4,4,4]"), std::string::npos) << m;
}

TEST(ModelTest, UndefinedInputAndMisplacedLossAreRefused) {
  auto r = FromText(
      "{input: [1, 8, 8], layers: [{name: f, type: flatten, inputs: nothing},"
      "{name: loss, type: softmax_cross_entropy}]}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("input 'nothing' is not a layer defined before it"),
            std::string::npos)
      << r.status().message();
  r = FromText("{input: [1, 8, 8], layers: [{name: f, type: flatten}]}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("last layer must be softmax_cross_entropy"),
            std::string::npos);
}

// The whole model's gradient, through a residual branch whose input feeds two layers, against
// central differences of the mean loss. No ReLU right after batch norm: normalised values sit
// at ReLU's kink, where central differences are wrong (ReLU has its own kink-free test).
// Every third element of every trainable variable: the analytic gradient against central
// differences of the loss. Returns how many elements were checked. With `kinks` (ReLU, max
// pooling on random values), an element whose central differences at two steps disagree has a
// kink within the step (a value crossing zero, a pool's argmax changing), where differences
// are wrong: it is skipped, as Caffe's GradientChecker skips values near its kink, and counted
// in *skipped.
int CheckGradientsNumerically(Model* model, const Shape& input, bool kinks = false,
                              int* skipped = nullptr) {
  model->InitVariables(3);
  std::mt19937_64 data_rng(4);
  Tensor x = testing::RandomTensor(input, &data_rng);
  std::vector<int32_t> labels{0, 3, 1};
  auto loss = [&]() {
    std::mt19937_64 rng(11);
    return static_cast<double>(model->Forward(x, labels, true, &rng));
  };
  loss();
  model->Backward();
  auto central = [&](Variable* v, int64_t i, float step) {
    const float orig = v->value[i];
    v->value[i] = orig + step;
    double up = loss();
    v->value[i] = orig - step;
    double down = loss();
    v->value[i] = orig;
    return (up - down) / (2 * step);
  };
  int checked = 0;
  for (Variable* v : model->trainable_variables()) {
    Tensor analytic = v->grad.Clone();
    for (int64_t i = 0; i < v->value.size(); i += 3) {
      double numeric = central(v, i, kinks ? 1e-3f : 1e-2f);
      if (kinks && std::fabs(numeric - central(v, i, 2e-3f)) > 1e-3 + 1e-2 * std::fabs(numeric)) {
        if (skipped) ++*skipped;
        continue;
      }
      EXPECT_NEAR(analytic[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric))
          << v->name << "[" << i << "]";
      ++checked;
    }
  }
  return checked;
}

TEST(ModelTest, ResidualModelGradientMatchesNumericGradient) {
  auto r = FromText(R"({input: [2, 6, 6], layers: [
      {name: c1, type: conv2d, filters: 3, kernel: 3},
      {name: bn, type: batch_norm},
      {name: c2, type: conv2d, filters: 3, kernel: 3},
      {name: sum, type: add, inputs: [c2, bn]},
      {name: pool, type: avg_pool, size: 2},
      {name: flat, type: flatten},
      {name: drop, type: dropout, keep_prob: 0.8},
      {name: fc, type: fully_connected, units: 4},
      {name: loss, type: softmax_cross_entropy}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(CheckGradientsNumerically(r.value().get(), Shape{3, 2, 6, 6}), 50);
}

TEST(ModelTest, ALayerReadingOneNodeTwiceOrTwoLayersReadingTheSamePairGetTheSumOfGradients) {
  // add [c, c] reads c twice; `twice` and `again` both read (doubled, c), so the layer walked
  // last in backward gets both its input gradients through scratch (this once stopped on a
  // CHECK: one scratch buffer per layer).
  auto r = FromText(R"({input: [2, 6, 6], layers: [
      {name: c, type: conv2d, filters: 2, kernel: 3},
      {name: doubled, type: add, inputs: [c, c]},
      {name: twice, type: add, inputs: [doubled, c]},
      {name: again, type: add, inputs: [doubled, c]},
      {name: sum, type: add, inputs: [twice, again]},
      {name: flat, type: flatten},
      {name: fc, type: fully_connected, units: 4},
      {name: loss, type: softmax_cross_entropy}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(CheckGradientsNumerically(r.value().get(), Shape{3, 2, 6, 6}), 20);
}

// One training step of `model` on fixed data: the loss, the logits and every gradient.
struct StepResult {
  float loss = 0;
  Tensor logits;
  std::vector<Tensor> grads;
};
StepResult TrainStep(Model* model, const Shape& input) {
  model->InitVariables(3);
  std::mt19937_64 data_rng(4);
  Tensor x = testing::RandomTensor(input, &data_rng);
  std::vector<int32_t> labels;
  for (int64_t i = 0; i < input.dim(0); ++i) labels.push_back(i % model->num_classes());
  std::mt19937_64 rng(11);  // the same dropout masks in both runs
  StepResult r;
  r.loss = model->Forward(x, labels, true, &rng);
  r.logits = model->logits().Clone();
  model->Backward();
  for (Variable* v : model->trainable_variables()) r.grads.push_back(v->grad.Clone());
  return r;
}

// The same step with the relus run after their max_pools and in config order: the same loss,
// logits and gradients, to the bit (max(relu(x)) is relu(max(x)), and both orders route the
// gradient to the same argmax or block it).
void ExpectSameStepWithReluAfterMaxPoolOnAndOff(Model* model, const Shape& input) {
  ASSERT_TRUE(model->relu_after_max_pool());
  StepResult on = TrainStep(model, input);
  model->set_relu_after_max_pool(false);
  EXPECT_TRUE(model->RelusRunAfterMaxPool().empty());
  StepResult off = TrainStep(model, input);
  model->set_relu_after_max_pool(true);
  EXPECT_EQ(on.loss, off.loss);
  ASSERT_EQ(on.logits.size(), off.logits.size());
  for (int64_t i = 0; i < on.logits.size(); ++i) ASSERT_EQ(on.logits[i], off.logits[i]) << i;
  std::vector<Variable*> vars = model->trainable_variables();
  ASSERT_EQ(on.grads.size(), vars.size());
  for (size_t v = 0; v < vars.size(); ++v) {
    int64_t nonzero = 0;
    for (int64_t i = 0; i < on.grads[v].size(); ++i) {
      ASSERT_EQ(on.grads[v][i], off.grads[v][i]) << vars[v]->name << "[" << i << "]";
      nonzero += on.grads[v][i] != 0.0f;
    }
    EXPECT_GT(nonzero, 0) << vars[v]->name;
  }
}

// A residual model trained a step with the adds handing their output gradient's buffer to an
// input and with every gradient copied: the same loss and gradients to the bit, for two steps
// in a row (the buffers go back to their nodes after each backward).
TEST(ModelTest, AddsHandingTheirGradientBufferOverGiveTheSameGradientsAsCopies) {
  auto r = FromText(R"({input: [2, 6, 6], layers: [
      {name: c1, type: conv2d, filters: 3, kernel: 3},
      {name: bn, type: batch_norm},
      {name: c2, type: conv2d, filters: 3, kernel: 3},
      {name: sum, type: add, inputs: [c2, bn]},
      {name: c3, type: conv2d, filters: 3, kernel: 1},
      {name: sum2, type: add, inputs: [sum, c3]},
      {name: twice, type: add, inputs: [sum2, sum2]},
      {name: flat, type: flatten},
      {name: fc, type: fully_connected, units: 4},
      {name: loss, type: softmax_cross_entropy}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Model* model = r.value().get();
  const Shape input{3, 2, 6, 6};
  std::vector<StepResult> handed, copied;
  for (int step = 0; step < 2; ++step) handed.push_back(TrainStep(model, input));
  model->set_hand_over_gradients(false);
  for (int step = 0; step < 2; ++step) copied.push_back(TrainStep(model, input));
  for (int step = 0; step < 2; ++step) {
    EXPECT_EQ(handed[step].loss, copied[step].loss) << step;
    std::vector<Variable*> vars = model->trainable_variables();
    ASSERT_EQ(handed[step].grads.size(), vars.size());
    for (size_t v = 0; v < vars.size(); ++v) {
      int64_t nonzero = 0;
      for (int64_t i = 0; i < handed[step].grads[v].size(); ++i) {
        ASSERT_EQ(handed[step].grads[v][i], copied[step].grads[v][i])
            << "step " << step << " " << vars[v]->name << "[" << i << "]";
        nonzero += handed[step].grads[v][i] != 0.0f;
      }
      EXPECT_GT(nonzero, 0) << vars[v]->name;
    }
  }
  // And the handed-over gradients are right: against central differences.
  model->set_hand_over_gradients(true);
  EXPECT_GT(CheckGradientsNumerically(model, input), 20);
}

TEST(ModelTest, RefNetsRelusBeforeMaxPoolRunAfterItWithTheSameLossLogitsAndGradients) {
  auto model = LoadConfigFile("refnet.yaml");
  // relu3 feeds dropout, not a pool; the names, summary and variables are the config's.
  EXPECT_EQ(model->RelusRunAfterMaxPool(), (std::vector<std::string>{"relu1", "relu2"}));
  EXPECT_NE(model->Summary().find("relu1 (relu) -> [32,28,28]"), std::string::npos)
      << model->Summary();
  EXPECT_NE(model->FindVariable("conv1/weights"), nullptr);
  ExpectSameStepWithReluAfterMaxPoolOnAndOff(model.get(), Shape{8, 1, 28, 28});
}

TEST(ModelTest, OnlyAReluThatOnlyAMaxPoolReadsRunsAfterIt) {
  // r1: read by an overlapping SAME 3x3/2 max pool only (rewritten); r2: by a max pool and an
  // add (kept: its full output is needed); r3: by an avg pool (kept: mean does not commute).
  auto r = FromText(R"({input: [2, 9, 9], layers: [
      {name: c1, type: conv2d, filters: 3, kernel: 3},
      {name: r1, type: relu},
      {name: p1, type: max_pool, size: 3, stride: 2, padding: SAME},
      {name: c2, type: conv2d, filters: 3, kernel: 3},
      {name: r2, type: relu},
      {name: p2, type: max_pool, size: 1},
      {name: both, type: add, inputs: [p2, r2]},
      {name: r3, type: relu},
      {name: p3, type: avg_pool, size: 2},
      {name: flat, type: flatten},
      {name: fc, type: fully_connected, units: 4},
      {name: loss, type: softmax_cross_entropy}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value()->RelusRunAfterMaxPool(), (std::vector<std::string>{"r1"}));
  ExpectSameStepWithReluAfterMaxPoolOnAndOff(r.value().get(), Shape{3, 2, 9, 9});
}

TEST(ModelTest, ConvReluMaxPoolModelGradientMatchesNumericGradientWithReluAfterThePool) {
  auto r = FromText(R"({input: [2, 8, 8], layers: [
      {name: c1, type: conv2d, filters: 3, kernel: 3},
      {name: r1, type: relu},
      {name: p1, type: max_pool, size: 2},
      {name: c2, type: conv2d, filters: 4, kernel: 3},
      {name: r2, type: relu},
      {name: p2, type: max_pool, size: 2},
      {name: flat, type: flatten},
      {name: fc, type: fully_connected, units: 4},
      {name: loss, type: softmax_cross_entropy}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r.value()->RelusRunAfterMaxPool(), (std::vector<std::string>{"r1", "r2"}));
  int skipped = 0;
  const int checked = CheckGradientsNumerically(r.value().get(), Shape{3, 2, 8, 8}, true, &skipped);
  EXPECT_GT(checked, 4 * skipped) << checked << " checked, " << skipped << " skipped at a kink";
  EXPECT_GT(checked, 50);
}

TEST(ModelTest, PlainGradientDescentOverfitsASmallBatch) {
  auto model = LoadConfigFile("refnet.yaml");
  model->InitVariables(1);
  std::mt19937_64 rng(2);
  Tensor x = testing::RandomTensor(Shape{16, 1, 28, 28}, &rng);
  std::vector<int32_t> labels;
  for (int i = 0; i < 16; ++i) labels.push_back(i % 10);
  float first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    last = model->Forward(x, labels, true, &rng);
    if (step == 0) first = last;
    model->Backward();
    for (Variable* v : model->trainable_variables()) {
      for (int64_t i = 0; i < v->value.size(); ++i) v->value[i] -= 0.05f * v->grad[i];
    }
  }
  EXPECT_LT(last, 0.25f * first) << "first loss " << first << ", last " << last;
  model->Forward(x, labels, false, &rng);
  EXPECT_GE(model->CountCorrect(labels), 15);
}

// A click model names its inputs; each layer reads the ones it names, and gradients reach the
// variables behind each input.
TEST(ModelTest, NamedInputsReachTheLayersThatNameThem) {
  auto model = FromText(R"(
name: two_inputs
inputs:
  - {name: dense, shape: [2]}
  - {name: ids, shape: [3]}
layers:
  - {name: emb, type: embedding, inputs: ids, dimension: 2, rows: 4}
  - {name: join, type: concat, inputs: [dense, emb]}
  - {name: logits, type: fully_connected, units: 2, use_bias: false}
  - {name: loss, type: softmax_cross_entropy}
)");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->input_names(), (std::vector<std::string>{"dense", "ids"}));
  (*model)->InitVariables(1);
  // Row r of the embedding holds [r, 10 r]; the logits' weights pick the join's features 0 and 3.
  Tensor& rows = (*model)->FindVariable("emb/rows")->value;
  for (int r = 0; r < 4; ++r) rows[2 * r] = r, rows[2 * r + 1] = 10.0f * r;
  Tensor& w = (*model)->FindVariable("logits/weights")->value;
  w.Fill(0.0f);
  w[0 * 4 + 0] = 1.0f;  // logit 0 = dense[0]
  w[1 * 4 + 3] = 1.0f;  // logit 1 = the embedding's second column
  const Tensor dense = Tensor::FromVector(Shape{1, 2}, {0.5f, 7.0f});
  const Tensor ids = Tensor::FromVector(Shape{1, 3}, {1, 3, -1});
  std::mt19937_64 rng(1);
  (*model)->Forward({&dense, &ids}, {0}, true, &rng);  // label 0: class 1 gets the gradient
  EXPECT_EQ((*model)->logits()[0], 0.5f);
  EXPECT_EQ((*model)->logits()[1], 40.0f);
  (*model)->Backward();
  const Tensor& grad = (*model)->FindVariable("emb/rows")->grad;
  EXPECT_NE(grad[2 * 1 + 1], 0.0f);  // rows 1 and 3 were read
  EXPECT_EQ(grad[2 * 1 + 1], grad[2 * 3 + 1]);
  EXPECT_EQ(grad[2 * 2 + 1], 0.0f);  // row 2 was not
}

TEST(ModelTest, InputAndNamedInputsAreExclusiveAndNamesAreUnique) {
  auto both = FromText("{input: [1, 2, 2], inputs: [{name: a, shape: [1]}], layers: []}");
  EXPECT_NE(both.status().message().find("either 'input'"), std::string::npos);
  auto twice = FromText(
      "{inputs: [{name: a, shape: [1]}, {name: a, shape: [2]}], layers: [{name: loss, type: "
      "softmax_cross_entropy}]}");
  EXPECT_NE(twice.status().message().find("input name 'a' is used twice"), std::string::npos)
      << twice.status().ToString();
  auto clash = FromText(
      "{inputs: [{name: a, shape: [2]}], layers: [{name: a, type: softmax_cross_entropy}]}");
  EXPECT_NE(clash.status().message().find("names a model input"), std::string::npos)
      << clash.status().ToString();
  for (const std::string reserved : {"labels", "logits", "probabilities"}) {
    auto named = FromText("{inputs: [{name: " + reserved +
                          ", shape: [2]}], layers: [{name: loss, type: softmax_cross_entropy}]}");
    EXPECT_NE(named.status().message().find("input name '" + reserved + "' is reserved"),
              std::string::npos)
        << named.status().ToString();
  }
}
}  // namespace
}  // namespace worker
}  // namespace pstrain
