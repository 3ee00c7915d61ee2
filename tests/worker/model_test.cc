#include "worker/network/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

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
  auto file = ConfigNode::LoadFile(SourceDir() + "/configs/" + name);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  auto model = Model::FromConfig(file->Child("model").value());
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return std::move(model).value();
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
// differences of the loss. Returns how many elements were checked.
int CheckGradientsNumerically(Model* model, const Shape& input) {
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
  int checked = 0;
  for (Variable* v : model->trainable_variables()) {
    Tensor analytic = v->grad.Clone();
    for (int64_t i = 0; i < v->value.size(); i += 3) {
      const float orig = v->value[i];
      const float step = 1e-2f;
      v->value[i] = orig + step;
      double up = loss();
      v->value[i] = orig - step;
      double down = loss();
      v->value[i] = orig;
      double numeric = (up - down) / (2 * step);
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

}  // namespace
}  // namespace worker
}  // namespace pstrain
