// pstrain-export against pstrain itself: a model with random (seeded) variables is saved the ways a
// run leaves it (a train_dir's checkpoint index, model.safetensors, one checkpoint file),
// exported by the tool, and onnxruntime's logits on a random batch are compared with
// Model::Forward's (inference mode) on the same batch; onnx.checker must pass
// (tests/onnx/run_onnx.py). Skips those checks when the venv lacks onnx or onnxruntime.
#include "worker/training/onnx_export.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/checkpoint_manager.h"
#include "common/checkpoint/safetensors.h"
#include "tests/onnx/onnx_test_util.h"
#include "tests/test_env.h"
#include "worker/network/model.h"
#include "worker/training/trained_weights.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;
using worker::Model;

// Relative to the logits' largest magnitude; float32 kernels that sum in another order differ
// by a few ulps of that scale per layer.
constexpr double kMaxRelativeError = 1e-4;

using pstrain::testing::OnnxPython;
using pstrain::testing::RunCommand;
using pstrain::testing::WriteFloats;

class OnnxExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (fs::temp_directory_path() /
            ("pstrain_onnx_" + std::to_string(getpid()) + "_" + info->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  static ConfigNode ModelNode(const std::string& config_path) {
    auto file = ConfigNode::LoadFile(config_path);
    EXPECT_TRUE(file.ok()) << file.status().ToString();
    return file->Child("model").value();
  }

  // The model of `config_path` with seeded random variables; biases and batch-norm statistics
  // are random too (their initial zeros and ones would hide a swapped or ignored variable).
  static std::unique_ptr<Model> RandomModel(const ConfigNode& model_node, uint64_t seed) {
    auto model = Model::FromConfig(model_node);
    EXPECT_TRUE(model.ok()) << model.status().ToString();
    if (!model.ok()) return nullptr;
    (*model)->InitVariables(seed);
    std::mt19937_64 rng(seed + 1);
    std::uniform_real_distribution<float> centered(-0.5f, 0.5f), positive(0.5f, 1.5f);
    for (worker::Variable* v : (*model)->variables()) {
      const std::string leaf = v->name.substr(v->name.rfind('/') + 1);
      if (leaf == "weights") continue;
      const bool scale = leaf == "gamma" || leaf == "moving_variance";
      for (int64_t i = 0; i < v->value.size(); ++i) {
        v->value[i] = scale ? positive(rng) : centered(rng);
      }
    }
    return std::move(model).value();
  }

  static CheckpointData Weights(Model* model) {
    CheckpointData data;
    data.global_step = 7;
    for (worker::Variable* v : model->variables()) data.tensors[v->name] = v->value.Clone();
    return data;
  }

  // Exports `model_node` with the tool from `checkpoint`, runs `model` and onnxruntime on a
  // random batch of `batch`, and checks they agree; returns run_onnx.py's report.
  nlohmann::json ExportAndCompare(const std::string& config_path, Model* model,
                                  const std::string& checkpoint, int64_t batch) {
    std::string why;
    const std::string python = OnnxPython(&why);
    const std::string onnx_path = Path("model.onnx");
    int code = 0;
    std::string out =
        RunCommand(std::string("'") + PSTRAIN_ONNX_BINARY + "' --config='" + config_path +
                       "' --checkpoint='" + checkpoint + "' --output='" + onnx_path + "'",
                   &code);
    EXPECT_EQ(code, 0) << out;
    EXPECT_TRUE(fs::exists(onnx_path)) << out;
    if (python.empty()) return {};  // callers skip before

    std::mt19937_64 rng(99);
    std::normal_distribution<float> normal;
    const Shape in = model->input_shape();
    Tensor images = Tensor::Uninitialized(Shape{batch, in.dim(0), in.dim(1), in.dim(2)});
    for (int64_t i = 0; i < images.size(); ++i) images[i] = normal(rng);
    model->Forward(images, std::vector<int32_t>(batch, 0), /*training=*/false, &rng);
    WriteFloats(Path("input.f32"), images);
    WriteFloats(Path("logits.f32"), model->logits());

    out = RunCommand("'" + python + "' '" + pstrain::testing::SourceDir() +
                         "/tests/onnx/run_onnx.py' '" + onnx_path + "' '" + Path("input.f32") +
                         "' '" + Path("logits.f32") + "' " + std::to_string(batch) + " " +
                         std::to_string(in.dim(0)) + " " + std::to_string(in.dim(1)) + " " +
                         std::to_string(in.dim(2)) + " " + std::to_string(model->num_classes()),
                     &code);
    EXPECT_EQ(code, 0) << out;
    if (code != 0) return {};
    nlohmann::json report = nlohmann::json::parse(out.substr(out.find("{\"checker\"")));
    std::printf("%s\n", report.dump().c_str());
    EXPECT_EQ(report["checker"], "ok");
    EXPECT_EQ(report["inputs"]["input"], nlohmann::json({"N", in.dim(0), in.dim(1), in.dim(2)}));
    EXPECT_EQ(report["outputs"]["logits"], nlohmann::json({"N", model->num_classes()}));
    EXPECT_EQ(report["outputs"]["probabilities"], nlohmann::json({"N", model->num_classes()}));
    EXPECT_GE(report["opset"][0].get<int>(), 13);
    EXPECT_LT(report["max_rel"].get<double>(), kMaxRelativeError) << report.dump();
    EXPECT_LT(report["probabilities_max_abs"].get<double>(), 1e-5) << report.dump();
    return report;
  }

  std::string dir_;
};

#define SKIP_WITHOUT_ONNX()                            \
  do {                                                 \
    std::string why;                                   \
    if (OnnxPython(&why).empty()) GTEST_SKIP() << why; \
  } while (0)

TEST_F(OnnxExportTest, RefNetFromATrainDirMatchesPstrainsLogitsInOnnxruntime) {
  SKIP_WITHOUT_ONNX();
  const std::string config = pstrain::testing::SourceDir() + "/configs/refnet.yaml";
  auto model = RandomModel(ModelNode(config), 17);
  ASSERT_NE(model, nullptr);
  // A train_dir without model.safetensors: its latest checkpoint.
  ASSERT_TRUE(CheckpointManager(Path("train"), 3).Save(Weights(model.get())).ok());
  nlohmann::json report = ExportAndCompare(config, model.get(), Path("train"), 3);
  EXPECT_EQ(report["ops"],
            nlohmann::json({"Conv", "Flatten", "Gemm", "Identity", "MaxPool", "Relu", "Softmax"}));
}

TEST_F(OnnxExportTest, ResNet20FromSafetensorsMatchesPstrainsLogitsInOnnxruntime) {
  SKIP_WITHOUT_ONNX();
  const std::string config = pstrain::testing::SourceDir() + "/configs/resnet20.yaml";
  auto model = RandomModel(ModelNode(config), 20);
  ASSERT_NE(model, nullptr);
  ASSERT_TRUE(ExportSafetensors(Weights(model.get()), Path("model.safetensors")).ok());
  nlohmann::json report = ExportAndCompare(config, model.get(), Path("model.safetensors"), 5);
  EXPECT_EQ(report["ops"], nlohmann::json({"Add", "AveragePool", "BatchNormalization", "Conv",
                                           "Flatten", "Gemm", "Identity", "Relu", "Softmax"}));
}

// Every layer type and the paddings that trip exporters: SAME with an odd pixel (asymmetric
// pads) at stride 2, VALID windows that leave pixels out, SAME average pooling at the border
// (real pixels only), transposed convolutions cropping and extending their output, batch norm
// and dropout on flat features, a fully connected layer without bias, a residual add, a leaky
// ReLU.
constexpr char kEveryLayer[] = R"(model:
  name: every_layer
  input: [3, 11, 9]
  layers:
    - {name: conv_same, type: conv2d, filters: 6, kernel: [4, 3], stride: 2, padding: SAME}
    - {name: bn_chw, type: batch_norm, epsilon: 0.01}
    - {name: relu1, type: relu}
    - {name: leaky1, type: leaky_relu, alpha: 0.1}
    - {name: conv_valid, type: conv2d, filters: 5, kernel: 2, stride: [2, 1], padding: VALID, use_bias: false}
    - {name: up_same, type: conv2d_transpose, filters: 4, kernel: [4, 3], stride: 2, padding: SAME}
    - {name: up_valid, type: conv2d_transpose, filters: 6, kernel: 2, stride: 3, padding: VALID, output_size: [10, 12], inputs: conv_valid}
    - {name: avg_same, type: avg_pool, size: [3, 4], stride: [2, 1], padding: SAME}
    - {name: max_same, type: max_pool, size: [2, 3], stride: [3, 2], padding: SAME, inputs: up_same}
    - {name: avg_valid, type: avg_pool, size: 2, inputs: max_same}
    - {name: flat_a, type: flatten, inputs: avg_same}
    - {name: fc_a, type: fully_connected, units: 12}
    - {name: flat_b, type: flatten, inputs: avg_valid}
    - {name: fc_b, type: fully_connected, units: 12, use_bias: false}
    - {name: sum, type: add, inputs: [fc_a, fc_b]}
    - {name: bn_flat, type: batch_norm}
    - {name: drop, type: dropout, keep_prob: 0.7}
    - {name: logits, type: fully_connected, units: 4}
    - {name: loss, type: softmax_cross_entropy}
)";

TEST_F(OnnxExportTest, EveryLayerTypeFromACheckpointFileMatchesPstrainsLogitsInOnnxruntime) {
  SKIP_WITHOUT_ONNX();
  const std::string config = Path("every_layer.yaml");
  std::ofstream(config) << kEveryLayer;
  auto model = RandomModel(ModelNode(config), 5);
  ASSERT_NE(model, nullptr);
  ASSERT_TRUE(WriteCheckpoint(Path("weights.ckpt"), Weights(model.get())).ok());
  nlohmann::json report = ExportAndCompare(config, model.get(), Path("weights.ckpt"), 4);
  EXPECT_EQ(report["ops"], nlohmann::json({"Add", "AveragePool", "BatchNormalization", "Conv",
                                           "ConvTranspose", "Flatten", "Gemm", "Identity",
                                           "LeakyRelu", "MaxPool", "Relu", "Softmax"}));
}

// A layer type pstrain-export has no ONNX form for (registered only in this test).
class Square : public worker::Layer {
 public:
  Status Configure(const ConfigNode& node) override {
    return node.CheckKeys({"name", "type", "inputs"});
  }
  Result<Shape> Setup(const std::vector<Shape>& inputs) override { return inputs[0]; }

 protected:
  void ForwardCpu(const std::vector<const Tensor*>&, Tensor*,
                  const worker::LayerContext&) override {}
  void BackwardCpu(const std::vector<const Tensor*>&, const Tensor&, const Tensor&,
                   const std::vector<Tensor*>&, const worker::LayerContext&) override {}
};
PSTRAIN_REGISTER_LAYER("onnx_test_square", Square);

TEST_F(OnnxExportTest, AnUnsupportedLayerFailsNamingTheLayerAndWhereItIs) {
  auto node = ConfigNode::Parse(R"(model:
  name: odd
  input: [1, 4, 4]
  layers:
    - {name: flat, type: flatten}
    - {name: squared, type: onnx_test_square}
    - {name: loss, type: softmax_cross_entropy}
)",
                                "odd.yaml");
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  auto exported = ExportOnnx(node->Child("model").value(), {}, OnnxExportOptions{});
  ASSERT_FALSE(exported.ok());
  const std::string message = exported.status().ToString();
  EXPECT_NE(message.find("layer 'squared' (onnx_test_square)"), std::string::npos) << message;
  EXPECT_NE(message.find("odd.yaml: model.layers[1]"), std::string::npos) << message;
  EXPECT_NE(message.find("no ONNX form"), std::string::npos) << message;
}

TEST_F(OnnxExportTest, AMissingOrMisshapenVariableFailsNamingIt) {
  const ConfigNode model_node = ModelNode(pstrain::testing::SourceDir() + "/configs/refnet.yaml");
  auto model = RandomModel(model_node, 3);
  ASSERT_NE(model, nullptr);
  std::map<std::string, Tensor> weights = Weights(model.get()).tensors;
  ASSERT_TRUE(ExportOnnx(model_node, weights, OnnxExportOptions{}).ok());

  std::map<std::string, Tensor> missing = weights;
  missing.erase("fc2/bias");
  auto exported = ExportOnnx(model_node, missing, OnnxExportOptions{});
  ASSERT_FALSE(exported.ok());
  EXPECT_NE(exported.status().message().find("'fc2/bias'"), std::string::npos)
      << exported.status().ToString();

  std::map<std::string, Tensor> misshapen = weights;
  misshapen["conv2/weights"] = Tensor(Shape{64, 32, 3, 3});
  exported = ExportOnnx(model_node, misshapen, OnnxExportOptions{});
  ASSERT_FALSE(exported.ok());
  EXPECT_NE(exported.status().message().find("'conv2/weights' is [64,32,3,3]"), std::string::npos)
      << exported.status().ToString();
}

TEST_F(OnnxExportTest, TheToolNamesACheckpointItCannotRead) {
  int code = 0;
  std::string out =
      RunCommand(std::string("'") + PSTRAIN_ONNX_BINARY + "' --config='" +
                     pstrain::testing::SourceDir() + "/configs/refnet.yaml' --checkpoint='" +
                     Path("empty_dir") + "' --output='" + Path("m.onnx") + "'",
                 &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("empty_dir"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(Path("m.onnx")));
  fs::create_directories(Path("empty_dir"));
  out = RunCommand(std::string("'") + PSTRAIN_ONNX_BINARY + "' --config='" +
                       pstrain::testing::SourceDir() + "/configs/refnet.yaml' --checkpoint='" +
                       Path("empty_dir") + "' --output='" + Path("m.onnx") + "'",
                   &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("neither model.safetensors"), std::string::npos) << out;
}

}  // namespace
}  // namespace pstrain
