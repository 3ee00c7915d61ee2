// Every layer's numeric gradient check, one test per case of tests/worker/layer_cases.h, and the
// tests of each layer's own semantics: forward values against tests/worker/reference_ops.h, the
// shapes and config errors, dropout's keep rate, batch norm's moving statistics, the loss value.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "tests/worker/gradient_checker.h"
#include "tests/worker/layer_cases.h"
#include "tests/worker/reference_ops.h"
#include "worker/network/model.h"

namespace pstrain {
namespace worker {
namespace testing {
namespace {

void ExpectNear(const Tensor& a, const Tensor& b, float tol) {
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], tol * std::max(1.0f, std::fabs(b[i]))) << "at " << i;
  }
}

Tensor RunForward(Layer* layer, const std::vector<Tensor>& inputs, const Shape& out_shape,
                  bool training = true) {
  std::vector<int64_t> dims{inputs[0].dim(0)};
  dims.insert(dims.end(), out_shape.dims().begin(), out_shape.dims().end());
  Tensor y = Tensor::Uninitialized(Shape(dims));
  std::mt19937_64 rng(1);
  LayerContext ctx{training, &rng, nullptr};
  std::vector<const Tensor*> in;
  for (auto& t : inputs) in.push_back(&t);
  layer->Forward(in, &y, ctx);
  return y;
}

TEST(WindowTest, MatchesTensorFlowOutputSizeAndPadding) {
  // SAME: out = ceil(in/stride), pad_needed = (out-1)*stride + window - in, top gets the half.
  Window1D w = ComputeWindow(7, 4, 2, Padding::kSame).value();
  EXPECT_EQ(w.out, 4);
  EXPECT_EQ(w.pad_before, 1);
  EXPECT_EQ(w.pad_after, 2);
  w = ComputeWindow(28, 5, 1, Padding::kSame).value();
  EXPECT_EQ(w.out, 28);
  EXPECT_EQ(w.pad_before, 2);
  EXPECT_EQ(w.pad_after, 2);
  // VALID: out = ceil((in - window + 1) / stride); leftover pixels are dropped.
  w = ComputeWindow(8, 3, 2, Padding::kValid).value();
  EXPECT_EQ(w.out, 3);
  EXPECT_EQ(w.pad_before + w.pad_after, 0);
  EXPECT_FALSE(ComputeWindow(2, 3, 1, Padding::kValid).ok());
}

// The table: every case's numeric gradient check.
class LayerCaseGradientTest : public ::testing::TestWithParam<LayerCase> {};

TEST_P(LayerCaseGradientTest, MatchesNumericGradient) {
  const LayerCase& c = GetParam();
  Shape out;
  std::unique_ptr<Layer> layer = MakeCaseLayer(c, &out);
  GradientCheckOptions opt;
  opt.step = c.gradient_step;
  opt.tolerance = c.gradient_tolerance;
  opt.training = c.training;
  opt.labels = c.labels;
  const double error = CheckGradients(layer.get(), CaseInputs(c), out, opt);
  RecordProperty("max_relative_error", std::to_string(error));
  std::printf("%s: max relative gradient error %.3g\n", c.name.c_str(), error);
}

INSTANTIATE_TEST_SUITE_P(LayerCases, LayerCaseGradientTest,
                         ::testing::ValuesIn(CasesWhere(&LayerCase::check_gradient)), CaseName);

// What makes a forgotten layer a red test: every registered type is in the table, both for the
// gradient check and for the CPU-vs-GPU comparison.
TEST(LayerCasesTest, EveryRegisteredLayerTypeHasAGradientCaseAndADeviceCase) {
  std::set<std::string> gradient, device;
  for (const LayerCase& c : LayerCases()) {
    const std::string type = CaseLayerType(c);
    EXPECT_TRUE(LayerRegistry::Global().Create(type, "x").ok())
        << "case " << c.name << ": type '" << type << "' is not registered";
    if (c.check_gradient) gradient.insert(type);
    if (c.compare_devices) device.insert(type);
  }
  for (const std::string& type : LayerRegistry::Global().Types()) {
    EXPECT_TRUE(gradient.count(type))
        << "layer type '" << type << "' has no gradient-checked case in tests/worker/layer_cases.h";
    EXPECT_TRUE(device.count(type))
        << "layer type '" << type << "' has no CPU-vs-GPU case in tests/worker/layer_cases.h";
  }
}

// A layer's name and type come from the registry that makes it, so the type it reports (in
// errors, checkpoints' variable owners, exported graphs) is always the one it registered under.
TEST(LayerRegistryTest, ALayerIsNamedAndTypedByTheRegistryThatMakesIt) {
  for (const std::string& type : LayerRegistry::Global().Types()) {
    Result<std::unique_ptr<Layer>> layer = LayerRegistry::Global().Create(type, "block3");
    ASSERT_TRUE(layer.ok()) << layer.status().ToString();
    EXPECT_EQ((*layer)->type(), type);
    EXPECT_EQ((*layer)->name(), "block3");
    EXPECT_EQ((*layer)->Describe(), "layer 'block3' (" + type + ")");
  }
}

// What a layer exports lives in its own files (Layer::TensorFlowOp, Layer::OnnxOp): every case,
// so every registered type (above), must have both, or TensorBoard draws the layer under its type
// name and pstrain-export refuses the model.
TEST(LayerCasesTest, EveryCaseHasATensorFlowOpAndAnOnnxOperator) {
  for (const LayerCase& c : LayerCases()) {
    SCOPED_TRACE(c.name);
    Shape out;
    std::unique_ptr<Layer> layer = MakeCaseLayer(c, &out);
    const Result<GraphOp> tensorflow = layer->TensorFlowOp();
    EXPECT_TRUE(tensorflow.ok()) << "layer type '" << layer->type()
                                 << "' has no TensorFlow op: " << tensorflow.status().ToString();
    if (tensorflow.ok()) {
      EXPECT_FALSE(tensorflow->op.empty());
    }
    const Result<GraphOp> onnx = layer->OnnxOp();
    EXPECT_TRUE(onnx.ok()) << "layer type '" << layer->type()
                           << "' has no ONNX export: " << onnx.status().ToString();
    if (onnx.ok()) {
      EXPECT_FALSE(onnx->op.empty());
    }
  }
}

TEST(LayerCasesTest, EveryCaseBuildsWithItsLabelsAndVariables) {
  std::set<std::string> names;
  for (const LayerCase& c : LayerCases()) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(names.insert(c.name).second) << "two cases named " << c.name;
    EXPECT_EQ(c.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_"), std::string::npos);
    Shape out;
    std::unique_ptr<Layer> layer = MakeCaseLayer(c, &out);
    EXPECT_EQ(static_cast<int>(c.inputs.size()), layer->num_inputs());
    const bool loss = CaseLayerType(c) == "softmax_cross_entropy";
    EXPECT_EQ(c.labels.size(), loss ? static_cast<size_t>(c.batch) : 0u);
  }
}

// Forward values against the naive loops; the gradients are the same cases' table tests.
void ExpectConvMatchesReference(const std::string& name, int64_t stride, Padding padding,
                                const Shape& want) {
  const LayerCase& c = FindCase(name);
  Shape out;
  auto conv = MakeCaseLayer(c, &out);
  EXPECT_EQ(out, want);
  Tensor x = CaseInputs(c)[0];
  const bool bias = conv->variables().size() > 1;
  ExpectNear(RunForward(conv.get(), {x}, out),
             ReferenceConv(x, conv->variables()[0].value,
                           bias ? conv->variables()[1].value : Tensor(), stride, padding),
             1e-4f);
}

TEST(Conv2DTest, SameStride2OnOddSizeMatchesReference) {
  ExpectConvMatchesReference("conv2d_same_stride2_odd_size", 2, Padding::kSame, Shape{4, 4, 4});
}

TEST(Conv2DTest, ValidWithLeftoverPixelsMatchesReference) {
  ExpectConvMatchesReference("conv2d_valid_leftover_pixels", 2, Padding::kValid, Shape{3, 3, 3});
}

TEST(Conv2DTest, BlockedLayoutChannelsMatchReference) {
  ExpectConvMatchesReference("conv2d_blocked_layout_channels", 1, Padding::kSame, Shape{32, 5, 5});
}

// conv2d_transpose: forward values against the naive loops for the table's cases.
void ExpectConvTransposeMatchesReference(const std::string& name, int64_t sh, int64_t sw,
                                         Padding padding, const Shape& want) {
  const LayerCase& c = FindCase(name);
  Shape out;
  auto up = MakeCaseLayer(c, &out);
  ASSERT_EQ(out, want);
  Tensor x = CaseInputs(c)[0];
  const bool bias = up->variables().size() > 1;
  ExpectNear(RunForward(up.get(), {x}, out),
             ReferenceConvTranspose(x, up->variables()[0].value,
                                    bias ? up->variables()[1].value : Tensor(), sh, sw, padding,
                                    want.dim(1), want.dim(2)),
             1e-4f);
}

TEST(Conv2DTransposeTest, SameStride2MatchesReference) {
  ExpectConvTransposeMatchesReference("conv2d_transpose_same_stride2", 2, 2, Padding::kSame,
                                      Shape{4, 8, 10});
}

TEST(Conv2DTransposeTest, SameStride2WithOutputSizeAndAsymmetricPaddingMatchesReference) {
  ExpectConvTransposeMatchesReference(
      "conv2d_transpose_same_stride2_output_size_asymmetric_padding", 2, 2, Padding::kSame,
      Shape{3, 7, 9});
}

TEST(Conv2DTransposeTest, ValidStride2x1MatchesReference) {
  ExpectConvTransposeMatchesReference("conv2d_transpose_valid_stride_2x1_without_bias", 2, 1,
                                      Padding::kValid, Shape{3, 7, 5});
}

TEST(Conv2DTransposeTest, ValidKernelSmallerThanStrideLeavesUnreachedPixelsAtTheBias) {
  ExpectConvTransposeMatchesReference("conv2d_transpose_valid_kernel_smaller_than_stride", 3, 3,
                                      Padding::kValid, Shape{2, 9, 9});
}

TEST(Conv2DTransposeTest, BlockedLayoutChannelsMatchReference) {
  ExpectConvTransposeMatchesReference("conv2d_transpose_blocked_layout_channels", 1, 1,
                                      Padding::kSame, Shape{16, 4, 4});
}

TEST(Conv2DTransposeTest, OutputSizeIsKerasConv2DTransposes) {
  struct Row {
    std::string fields;
    Shape in, want;
  };
  // keras.layers.Conv2DTranspose(...).compute_output_shape, channels first.
  const std::vector<Row> rows = {
      {"kernel: 3, stride: 2, padding: SAME", {1, 7, 7}, {2, 14, 14}},
      {"kernel: 3, stride: 2, padding: VALID", {1, 7, 7}, {2, 15, 15}},
      {"kernel: 2, stride: 3, padding: VALID", {1, 7, 7}, {2, 21, 21}},
      {"kernel: 5, padding: VALID", {1, 4, 6}, {2, 8, 10}},
      {"kernel: 4, stride: [1, 3], padding: SAME", {1, 4, 6}, {2, 4, 18}},
      {"kernel: 3, stride: 2, padding: SAME, output_size: [13, 14]", {1, 7, 7}, {2, 13, 14}},
      {"kernel: 3, stride: 2, padding: VALID, output_size: 16", {1, 7, 7}, {2, 16, 16}},
  };
  for (const Row& r : rows) {
    Shape out;
    MakeLayer("{type: conv2d_transpose, filters: 2, " + r.fields + "}", {r.in}, &out);
    EXPECT_EQ(out, r.want) << r.fields << " on " << r.in.ToString();
  }
}

// <conv2d_transpose_W(x), y> == <x, conv2d_W(y)>: the layer is conv2d's input gradient, with
// conv2d's weights as they are ([in_channels, filters, kh, kw] is that conv2d's OIHW).
TEST(Conv2DTransposeTest, IsTheAdjointOfConv2DWithTheSameWeights) {
  for (const std::string fields : {"kernel: 4, stride: 2, padding: SAME, output_size: [7, 9]",
                                   "kernel: [3, 2], stride: [2, 1], padding: VALID"}) {
    SCOPED_TRACE(fields);
    Shape out, back;
    auto up = MakeLayer("{type: conv2d_transpose, filters: 3, use_bias: false, " + fields + "}",
                        {Shape{2, 4, 5}}, &out);
    auto conv = MakeLayer("{type: conv2d, filters: 2, use_bias: false, " +
                              fields.substr(0, fields.find(", output_size")) + "}",
                          {out}, &back);
    ASSERT_EQ(back, (Shape{2, 4, 5}));
    conv->variables()[0].value.CopyFrom(up->variables()[0].value);
    std::mt19937_64 rng(21);
    Tensor x = RandomTensor(Batched(2, Shape{2, 4, 5}), &rng);
    Tensor y = RandomTensor(Batched(2, out), &rng);
    Tensor tx = RunForward(up.get(), {x}, out), cy = RunForward(conv.get(), {y}, back);
    double a = 0.0, b = 0.0;
    for (int64_t i = 0; i < y.size(); ++i) a += static_cast<double>(tx[i]) * y[i];
    for (int64_t i = 0; i < x.size(); ++i) b += static_cast<double>(x[i]) * cy[i];
    EXPECT_NEAR(a, b, 1e-4 * std::max(1.0, std::fabs(b)));
  }
}

Status ModelError(const std::string& up_fields) {
  auto node = ConfigNode::Parse(
      "{input: [2, 7, 7], layers: [{name: up, type: conv2d_transpose, filters: 2, " + up_fields +
          "}, {name: flat, type: flatten}, {name: loss, type: softmax_cross_entropy}]}",
      "model.yaml");
  EXPECT_TRUE(node.ok());
  auto model = Model::FromConfig(*node);
  return model.ok() ? Status::OK() : model.status();
}

void ExpectErrorNames(const Status& s, const std::vector<std::string>& parts) {
  ASSERT_FALSE(s.ok());
  for (const std::string& part : parts) {
    EXPECT_NE(s.message().find(part), std::string::npos) << s.message() << " lacks " << part;
  }
}

TEST(Conv2DTransposeTest, ConfigErrorsNameTheLayerAndTheField) {
  const std::string layer = "layer 'up' (conv2d_transpose)";
  ExpectErrorNames(ModelError("kernel: 3, padding: FULL"),
                   {layer, "model.yaml: layers[0]", "field 'padding'", "SAME or VALID"});
  ExpectErrorNames(ModelError("kernel: 3, stride: 0"), {layer, "field 'stride'", "positive"});
  ExpectErrorNames(ModelError("kernel: 3, stride: [2, -1]"), {layer, "field 'stride'"});
  ExpectErrorNames(ModelError("stride: 2"), {layer, "missing field 'kernel'"});
  ExpectErrorNames(ModelError("kernel: 3, dilation: 2"), {layer, "dilation"});
  // A SAME stride 2 conv2d gives 7 from 13 or 14 only; a VALID one with kernel 3 from 15 or 16.
  ExpectErrorNames(
      ModelError("kernel: 3, stride: 2, output_size: [12, 14]"),
      {layer, "model.yaml: layers[0]", "field 'output_size'", "height 12", "expected 13 to 14"});
  ExpectErrorNames(ModelError("kernel: 3, stride: 2, padding: VALID, output_size: [15, 17]"),
                   {layer, "field 'output_size'", "width 17", "expected 15 to 16"});
  ExpectErrorNames(ModelError("kernel: 3, output_size: [7, 8]"),
                   {layer, "field 'output_size'", "width 8", "expected 7"});
  ExpectErrorNames(ModelError("kernel: 3, output_size: [7, 7, 7]"), {"field 'output_size'"});
}

// A small generator-like model: conv2d down, conv2d_transpose up, on to the loss. It builds
// with the shapes TensorFlow gives and a few SGD steps on one batch lower its loss.
TEST(Conv2DTransposeTest, ModelBuildsWithTheRightShapesAndTrains) {
  auto node = ConfigNode::Parse(R"({name: updown, input: [1, 8, 8], layers: [
      {name: down, type: conv2d, filters: 4, kernel: 3, stride: 2},
      {name: relu, type: relu},
      {name: up, type: conv2d_transpose, filters: 2, kernel: 3, stride: 2},
      {name: up_valid, type: conv2d_transpose, filters: 2, kernel: 2, padding: VALID},
      {name: flat, type: flatten},
      {name: fc, type: fully_connected, units: 3},
      {name: loss, type: softmax_cross_entropy}]})",
                                "model.yaml");
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  auto built = Model::FromConfig(*node);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  Model& model = **built;
  const std::string summary = model.Summary();
  EXPECT_NE(summary.find("up (conv2d_transpose) -> [2,8,8]"), std::string::npos) << summary;
  EXPECT_NE(summary.find("up_valid (conv2d_transpose) -> [2,9,9]"), std::string::npos) << summary;
  ASSERT_NE(model.FindVariable("up/weights"), nullptr);
  EXPECT_EQ(model.FindVariable("up/weights")->value.shape(), (Shape{4, 2, 3, 3}));
  EXPECT_EQ(model.FindVariable("up/bias")->value.shape(), (Shape{2}));
  // down 4*1*3*3 + 4, up 4*2*3*3 + 2, up_valid 2*2*2*2 + 2, fc 162*3 + 3
  EXPECT_EQ(model.num_parameters(), 40 + 74 + 18 + 489);

  model.InitVariables(3);
  std::mt19937_64 rng(4);
  Tensor x = RandomTensor(Shape{6, 1, 8, 8}, &rng);
  const std::vector<int32_t> labels{0, 1, 2, 2, 1, 0};
  float first = 0.0f, last = 0.0f;
  for (int step = 0; step < 30; ++step) {
    last = model.Forward(x, labels, /*training=*/true, &rng);
    if (step == 0) first = last;
    ASSERT_TRUE(std::isfinite(last)) << "step " << step;
    model.Backward();
    for (Variable* v : model.trainable_variables()) {
      for (int64_t i = 0; i < v->value.size(); ++i) v->value[i] -= 0.1f * v->grad[i];
    }
  }
  EXPECT_NEAR(first, std::log(3.0f), 0.5f);
  EXPECT_LT(last, 0.5f * first) << "loss " << first << " -> " << last;
  EXPECT_NE(model.FindVariable("up/weights")->grad[0], 0.0f);
}

void ExpectPoolMatchesReference(const std::string& name, bool max, int64_t size, int64_t stride,
                                Padding padding, const Shape& want, float tol) {
  const LayerCase& c = FindCase(name);
  Shape out;
  auto pool = MakeCaseLayer(c, &out);
  EXPECT_EQ(out, want);
  Tensor x = CaseInputs(c)[0];
  ExpectNear(RunForward(pool.get(), {x}, out), ReferencePool(x, max, size, stride, padding), tol);
}

TEST(PoolTest, MaxSameStride2OnOddSizeMatchesReference) {
  ExpectPoolMatchesReference("max_pool_same_stride2_odd_size", true, 3, 2, Padding::kSame,
                             Shape{2, 4, 4}, 1e-6f);
}

TEST(PoolTest, MaxValidWithLeftoverPixelsMatchesReference) {
  ExpectPoolMatchesReference("max_pool_valid_leftover_pixels", true, 2, 2, Padding::kValid,
                             Shape{3, 2, 2}, 1e-6f);
}

TEST(PoolTest, AvgSameExcludesPaddingAndMatchesReference) {
  ExpectPoolMatchesReference("avg_pool_same_stride2_excludes_padding", false, 3, 2, Padding::kSame,
                             Shape{2, 3, 3}, 1e-5f);
}

TEST(FullyConnectedTest, MatchesReference) {
  const LayerCase& c = FindCase("fully_connected");
  Shape out;
  auto fc = MakeCaseLayer(c, &out);
  Tensor x = CaseInputs(c)[0];
  ASSERT_EQ(x.shape(), (Shape{3, 7}));
  Tensor& w = fc->variables()[0].value;
  Tensor y = RunForward(fc.get(), {x}, out);
  for (int i = 0; i < 3; ++i)
    for (int u = 0; u < 5; ++u) {
      double s = fc->variables()[1].value[u];
      for (int f = 0; f < 7; ++f) s += x[i * 7 + f] * w[u * 7 + f];
      EXPECT_NEAR(y[i * 5 + u], s, 1e-5);
    }
}

TEST(FullyConnectedTest, RefusesAnUnflattenedInput) {
  auto layer = LayerRegistry::Global().Create("fully_connected", "fc1").value();
  ASSERT_TRUE(layer->Configure(ConfigNode::Parse("{units: 3}", "t").value()).ok());
  Status s = layer->Setup({Shape{64, 7, 7}}).status();
  EXPECT_NE(s.message().find("layer 'fc1' (fully_connected)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("[64,7,7]"), std::string::npos) << s.message();
}

TEST(LeakyReluTest, ScalesNegativeInputsByAlphaTwoTenthsByDefault) {
  for (const char* name : {"leaky_relu", "leaky_relu_alpha_0_01_batch4"}) {
    SCOPED_TRACE(name);
    const LayerCase& c = FindCase(name);
    const float alpha = c.yaml.find("0.01") != std::string::npos ? 0.01f : 0.2f;
    Shape out;
    auto layer = MakeCaseLayer(c, &out);
    EXPECT_EQ(out, c.inputs[0]);
    const Tensor x = CaseInputs(c)[0];
    const Tensor y = RunForward(layer.get(), {x}, out);
    for (int64_t i = 0; i < x.size(); ++i) {
      ASSERT_FLOAT_EQ(y[i], x[i] > 0.0f ? x[i] : alpha * x[i]) << "at " << i;
    }
    ASSERT_FLOAT_EQ(layer->TensorFlowOp()->Find("alpha")->f, alpha);
    ASSERT_FLOAT_EQ(layer->OnnxOp()->Find("alpha")->f, alpha);
  }
}

TEST(LeakyReluTest, ConfigErrorsNameTheField) {
  auto layer = LayerRegistry::Global().Create("leaky_relu", "lr").value();
  auto node = ConfigNode::Parse("{type: leaky_relu, alpha: .nan}", "model.yaml");
  ASSERT_TRUE(node.ok());
  Status s = layer->Configure(*node);
  EXPECT_NE(s.message().find("field 'alpha'"), std::string::npos) << s.message();
  node = ConfigNode::Parse("{type: leaky_relu, slope: 0.1}", "model.yaml");
  s = layer->Configure(*node);
  EXPECT_NE(s.message().find("unknown field 'slope'"), std::string::npos) << s.message();
}

TEST(FlattenTest, OutputHoldsEveryInputValue) {
  Shape out;
  MakeCaseLayer(FindCase("flatten"), &out);
  EXPECT_EQ(out, (Shape{18}));
}

TEST(DropoutTest, FixedSeedKeepsAboutKeepProbAndScalesTheKept) {
  const LayerCase& c = FindCase("dropout_training_fixed_seed");
  Shape out;
  auto drop = MakeCaseLayer(c, &out);
  Tensor x = CaseInputs(c)[0];
  ASSERT_EQ(x.size(), 400);
  Tensor y = RunForward(drop.get(), {x}, out);
  int kept = 0;
  for (int64_t i = 0; i < y.size(); ++i) {
    if (y[i] != 0.0f) {
      ++kept;
      EXPECT_NEAR(y[i], x[i] / 0.7f, 1e-6);
    }
  }
  EXPECT_NEAR(kept / 400.0, 0.7, 0.08);
}

TEST(DropoutTest, IsIdentityInEvaluation) {
  const LayerCase& c = FindCase("dropout_evaluation");
  Shape out;
  auto drop = MakeCaseLayer(c, &out);
  Tensor x = CaseInputs(c)[0];
  ExpectNear(RunForward(drop.get(), {x}, out, /*training=*/false), x, 0.0f);
}

TEST(BatchNormTest, EvaluationModeUsesMovingStatistics) {
  const LayerCase& c = FindCase("batch_norm_evaluation_moving_statistics");
  Shape out;
  auto bn = MakeCaseLayer(c, &out);
  Tensor x = CaseInputs(c)[0];
  Tensor y = RunForward(bn.get(), {x}, out, /*training=*/false);
  EXPECT_NEAR(y[0], (x[0] - 0.5f) / std::sqrt(4.001f), 1e-5);
  EXPECT_NEAR(y[9], (x[9] + 1.0f) / std::sqrt(0.251f), 1e-5);
}

TEST(BatchNormTest, MovingStatisticsChangeOnlyInTraining) {
  Shape out;
  auto bn = MakeLayer("{type: batch_norm, momentum: 0.9}", {Shape{1, 2, 2}}, &out);
  Tensor x = Tensor::FromVector(Shape{2, 1, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  RunForward(bn.get(), {x}, out, /*training=*/false);
  EXPECT_EQ(bn->variables()[2].value[0], 0.0f);
  EXPECT_EQ(bn->variables()[3].value[0], 1.0f);
  RunForward(bn.get(), {x}, out, /*training=*/true);
  // batch mean 4.5, unbiased variance 6 (population 5.25 * 8/7)
  EXPECT_NEAR(bn->variables()[2].value[0], 0.1f * 4.5f, 1e-6);
  EXPECT_NEAR(bn->variables()[3].value[0], 0.9f + 0.1f * 6.0f, 1e-5);
}

TEST(SoftmaxCrossEntropyTest, LossValue) {
  Shape out;
  auto ce = MakeLayer("{type: softmax_cross_entropy}", {Shape{4}}, &out);
  Tensor z = Tensor::FromVector(Shape{2, 4}, {1, 2, 3, 4, -1, 0, 0.5f, 2});
  std::vector<int32_t> labels{3, 1};
  std::mt19937_64 rng(1);
  LayerContext ctx{true, &rng, &labels};
  Tensor y = Tensor::Uninitialized(Shape{2});
  ce->Forward({&z}, &y, ctx);
  double lse0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(4.0));
  EXPECT_NEAR(y[0], lse0 - 4.0, 1e-5);
  // The table's case checks the gradient at these labels; this one at these logits.
  GradientCheckOptions opt;
  opt.labels = labels;
  opt.step = 1e-3f;
  CheckGradients(ce.get(), {z}, out, opt);
}

TEST(EmbeddingTest, SumsTheRowsOfEachExamplesSlotsSkippingPadding) {
  Shape out;
  auto embedding = MakeLayer("{type: embedding, dimension: 2, rows: 3}", {Shape{3}}, &out);
  ASSERT_EQ(out, (Shape{2}));
  embedding->variables()[0].value.CopyFrom(
      Tensor::FromVector(Shape{3, 2}, {1, 2, 10, 20, 100, 200}));
  const Tensor slots = Tensor::FromVector(Shape{2, 3}, {0, 2, -1, 1, 1, 1});
  Tensor y = RunForward(embedding.get(), {slots}, out);
  EXPECT_EQ(y.ToVector(), (std::vector<float>{101, 202, 30, 60}));
}

TEST(EmbeddingTest, MeanDividesByTheFilledSlotsAndARowReadTwiceGetsBothGradients) {
  Shape out;
  auto embedding =
      MakeLayer("{type: embedding, dimension: 1, rows: 2, combiner: mean}", {Shape{4}}, &out);
  embedding->variables()[0].value.CopyFrom(Tensor::FromVector(Shape{2, 1}, {3, 5}));
  // Example 0 reads row 0 twice and row 1 once; example 1 only pads.
  const Tensor slots = Tensor::FromVector(Shape{2, 4}, {0, -1, 1, 0, -1, -1, -1, -1});
  Tensor y = RunForward(embedding.get(), {slots}, out);
  EXPECT_FLOAT_EQ(y[0], 11.0f / 3.0f);
  EXPECT_EQ(y[1], 0.0f);
  std::mt19937_64 rng(1);
  LayerContext ctx{true, &rng, nullptr};
  Tensor slot_grad = Tensor::Filled(slots.shape(), NAN);
  embedding->Backward({&slots}, y, Tensor::FromVector(Shape{2, 1}, {3, 7}), {&slot_grad}, ctx);
  EXPECT_FLOAT_EQ(embedding->variables()[0].grad[0], 2.0f);  // 3 * 2/3
  EXPECT_FLOAT_EQ(embedding->variables()[0].grad[1], 1.0f);  // 3 * 1/3
  for (int64_t i = 0; i < slot_grad.size(); ++i) EXPECT_EQ(slot_grad[i], 0.0f);
}

TEST(EmbeddingTest, ConfigErrorsNameTheField) {
  auto error = [](const std::string& yaml) {
    auto node = ConfigNode::Parse(yaml, "model.yaml");
    auto layer = LayerRegistry::Global().Create("embedding", "C1");
    return layer.value()->Configure(node.value()).ToString();
  };
  EXPECT_NE(error("{type: embedding, rows: 4}").find("'dimension'"), std::string::npos);
  EXPECT_NE(error("{type: embedding, dimension: 2, rows: 0}").find("field 'rows'"),
            std::string::npos);
  EXPECT_NE(error("{type: embedding, dimension: 2, rows: 20000000}").find("16777216"),
            std::string::npos);
  EXPECT_NE(error("{type: embedding, dimension: 2, rows: 4, combiner: max}")
                .find("field 'combiner' must be sum or mean, got 'max'"),
            std::string::npos);
}

TEST(ConcatTest, JoinsInputsOfDifferentWidthsInListOrder) {
  Shape out;
  auto concat =
      MakeLayer("{type: concat, inputs: [a, b, c]}", {Shape{1}, Shape{3}, Shape{2}}, &out);
  ASSERT_EQ(concat->num_inputs(), 3);
  ASSERT_EQ(out, (Shape{6}));
  const Tensor a = Tensor::FromVector(Shape{2, 1}, {1, 2});
  const Tensor b = Tensor::FromVector(Shape{2, 3}, {3, 4, 5, 6, 7, 8});
  const Tensor c = Tensor::FromVector(Shape{2, 2}, {9, 10, 11, 12});
  Tensor y = RunForward(concat.get(), {a, b, c}, out);
  EXPECT_EQ(y.ToVector(), (std::vector<float>{1, 3, 4, 5, 9, 10, 2, 6, 7, 8, 11, 12}));
  GradientCheckOptions opt;
  CheckGradients(concat.get(), {a, b, c}, out, opt);
}

TEST(ConcatTest, RefusesInputsThatDifferBeyondTheFirstAxis) {
  auto layer = LayerRegistry::Global().Create("concat", "join").value();
  ASSERT_TRUE(layer->Configure(ConfigNode::Parse("{type: concat}", "m.yaml").value()).ok());
  auto shape = layer->Setup({Shape{2, 3, 3}, Shape{2, 4, 3}});
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("input 1 [2,4,3] must match input 0 [2,3,3]"),
            std::string::npos)
      << shape.status().ToString();
  auto one = LayerRegistry::Global().Create("concat", "join").value();
  EXPECT_NE(one->Configure(ConfigNode::Parse("{type: concat, inputs: [a]}", "m.yaml").value())
                .ToString()
                .find("at least two inputs"),
            std::string::npos);
}

}  // namespace
}  // namespace testing
}  // namespace worker
}  // namespace pstrain
