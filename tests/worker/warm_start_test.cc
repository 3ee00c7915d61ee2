// The chief's warm start (worker/training/warm_start.h): a fresh model takes a checkpoint's
// values, file or directory, except what --restore_exclude names; a variable of another shape is
// refused naming both; a missing checkpoint is named.
#include "worker/training/warm_start.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/checkpoint_manager.h"
#include "common/checkpoint/tf_checkpoint.h"
#include "common/config.h"
#include "tests/test_env.h"

namespace pstrain {
namespace worker {
namespace {

constexpr char kModel[] = R"(
input: [1, 4, 4]
layers:
  - {name: flat, type: flatten}
  - {name: fc1, type: fully_connected, units: 3}
  - {name: fc2, type: fully_connected, units: 2}
  - {name: loss, type: softmax_cross_entropy}
)";

std::unique_ptr<Model> Fresh() {
  auto node = ConfigNode::Parse(kModel, "model.yaml");
  auto model = Model::FromConfig(*node);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  (*model)->InitVariables(7);
  return std::move(model).value();
}

const Tensor& Value(Model* m, const std::string& name) {
  for (Variable* v : m->variables()) {
    if (v->name == name) return v->value;
  }
  ADD_FAILURE() << "no variable " << name;
  static Tensor none;
  return none;
}

// A checkpoint of a trained model: every value 0.5, at step 900.
CheckpointData Trained() {
  std::unique_ptr<Model> m = Fresh();
  CheckpointData data;
  data.global_step = 900;
  for (Variable* v : m->variables()) data.tensors[v->name] = Tensor::Filled(v->value.shape(), 0.5f);
  return data;
}

std::string Dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/warm_start_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(WarmStartTest, AFileGivesEveryVariableButTheExcludedOnes) {
  const std::string path = Dir("file") + "/model.ckpt-900";
  ASSERT_TRUE(WriteCheckpoint(path, Trained()).ok());
  std::unique_ptr<Model> m = Fresh();
  const std::vector<float> fc2_initial = Value(m.get(), "fc2/weights").ToVector();
  Result<RestoreReport> r = WarmStart(path, SplitList("fc2/*,"), m.get());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (float x : Value(m.get(), "fc1/weights").ToVector()) EXPECT_EQ(x, 0.5f);
  EXPECT_EQ(Value(m.get(), "fc2/weights").ToVector(), fc2_initial) << "excluded: a new head";
  EXPECT_EQ(r->filtered.size(), 2u);
  const std::string said = DescribeWarmStart(path, *r);
  EXPECT_NE(said.find("2 left at their initial values by --restore_exclude"), std::string::npos)
      << said;
}

TEST(WarmStartTest, ADirectoryGivesItsLatestCheckpoint) {
  const std::string dir = Dir("dir");
  CheckpointManager manager(dir, 0);
  CheckpointData older = Trained();
  for (auto& [name, t] : older.tensors) t = Tensor::Filled(t.shape(), -1.0f);
  older.global_step = 100;
  ASSERT_TRUE(manager.Save(older).ok());
  ASSERT_TRUE(manager.Save(Trained()).ok());
  std::unique_ptr<Model> m = Fresh();
  ASSERT_TRUE(WarmStart(dir, {}, m.get()).ok());
  for (float x : Value(m.get(), "fc2/weights").ToVector()) EXPECT_EQ(x, 0.5f) << "the latest";
}

// A parameter server's checkpoint holds a variable split across servers as its parts
// ("fc1/weights/part_0", "fc1/weights/part_1", their slots too): they are joined back along the
// rows, so a whole model gets the variable, not its initial values beside a warning.
TEST(WarmStartTest, AParameterServersSplitVariableIsJoinedFromItsParts) {
  CheckpointData data = Trained();
  const Shape shape = data.tensors.at("fc1/weights").shape();
  ASSERT_GE(shape.dim(0), 2);
  const int64_t columns = shape.num_elements() / shape.dim(0);
  data.tensors.erase("fc1/weights");
  data.tensors["fc1/weights/part_0"] = Tensor::Filled(Shape{shape.dim(0) - 1, columns}, 0.25f);
  data.tensors["fc1/weights/part_1"] = Tensor::Filled(Shape{1, columns}, 0.75f);
  data.tensors["fc1/weights/part_0/m"] = Tensor::Filled(Shape{shape.dim(0) - 1, columns}, 1.0f);
  data.tensors["fc1/weights/part_1/m"] = Tensor::Filled(Shape{1, columns}, 2.0f);
  const std::string path = Dir("split") + "/model.ckpt-900";
  ASSERT_TRUE(WriteCheckpoint(path, data).ok());
  std::unique_ptr<Model> m = Fresh();
  Result<RestoreReport> r = WarmStart(path, {}, m.get());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->missing.empty()) << r->missing[0];
  const std::vector<float> w = Value(m.get(), "fc1/weights").ToVector();
  ASSERT_EQ(static_cast<int64_t>(w.size()), shape.num_elements());
  for (int64_t i = 0; i < static_cast<int64_t>(w.size()); ++i) {
    EXPECT_EQ(w[i], i < (shape.dim(0) - 1) * columns ? 0.25f : 0.75f) << i;
  }

  // Parts that do not stack (another row length) are refused, naming the variable.
  data.tensors["fc1/weights/part_1"] = Tensor::Filled(Shape{1, columns + 1}, 0.75f);
  ASSERT_TRUE(WriteCheckpoint(path, data).ok());
  Result<RestoreReport> bad = WarmStart(path, {}, Fresh().get());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("split variable 'fc1/weights'"), std::string::npos)
      << bad.status().ToString();
}

TEST(WarmStartTest, AnotherShapeOrAMissingFileIsNamed) {
  const std::string path = Dir("shape") + "/model.ckpt-1";
  CheckpointData other = Trained();
  other.tensors["fc1/weights"] = Tensor::Filled(Shape{5, 3}, 0.5f);
  ASSERT_TRUE(WriteCheckpoint(path, other).ok());
  std::unique_ptr<Model> m = Fresh();
  Result<RestoreReport> r = WarmStart(path, {}, m.get());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("fc1/weights"), std::string::npos) << r.status().message();
  Result<RestoreReport> missing = WarmStart(path + ".nope", {}, m.get());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--checkpoint_path=" + path + ".nope"),
            std::string::npos)
      << missing.status().message();
}

// Distinct values everywhere, so that a transposed layout cannot pass.
CheckpointData TrainedDistinct() {
  CheckpointData data = Trained();
  float next = 0.25f;
  for (auto& [name, t] : data.tensors) {
    for (int64_t i = 0; i < t.size(); ++i) t[i] = next += 0.125f;
  }
  return data;
}

TEST(WarmStartTest, ATensorFlowBundleGivesItsVariablesInPstrainsLayout) {
  const std::string prefix = Dir("tf_bundle") + "/model.ckpt-900";
  const CheckpointData trained = TrainedDistinct();
  ASSERT_TRUE(WriteTfCheckpoint(prefix, trained).ok());
  std::unique_ptr<Model> m = Fresh();
  const std::vector<float> fc2_initial = Value(m.get(), "fc2/bias").ToVector();
  Result<RestoreReport> r = WarmStart(prefix, SplitList("fc2/bias"), m.get());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Value(m.get(), "fc1/weights").ToVector(), trained.tensors.at("fc1/weights").ToVector());
  EXPECT_EQ(Value(m.get(), "fc2/weights").ToVector(), trained.tensors.at("fc2/weights").ToVector());
  EXPECT_EQ(Value(m.get(), "fc2/bias").ToVector(), fc2_initial) << "--restore_exclude honoured";
}

TEST(WarmStartTest, ATensorFlowBundleWithoutAVariableOrOfAnotherShapeIsNamedBothSides) {
  const std::string dir = Dir("tf_mismatch");
  CheckpointData lacking = TrainedDistinct();
  lacking.tensors.erase("fc2/bias");
  ASSERT_TRUE(WriteTfCheckpoint(dir + "/lacking", lacking).ok());
  std::unique_ptr<Model> m = Fresh();
  Result<RestoreReport> r = WarmStart(dir + "/lacking", {}, m.get());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("the model's variable 'fc2/bias' is not in TensorFlow "
                                      "checkpoint " +
                                      dir + "/lacking, which holds: fc1/bias, "),
            std::string::npos)
      << r.status().message();
  EXPECT_TRUE(WarmStart(dir + "/lacking", {"fc2/bias"}, m.get()).ok()) << "unless excluded";

  CheckpointData other = TrainedDistinct();
  other.tensors["fc1/weights"] = Tensor::Filled(Shape{5, 16}, 0.5f);
  ASSERT_TRUE(WriteTfCheckpoint(dir + "/other", other).ok());
  r = WarmStart(dir + "/other", {}, m.get());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'fc1/weights' has shape [16,3] in TensorFlow's layout, "
                                      "but TensorFlow checkpoint " +
                                      dir +
                                      "/other holds it as "
                                      "[16,5]"),
            std::string::npos)
      << r.status().message();
}

// TensorFlow's own Saver writes RefNet (tests/checkpoint/tf_write_bundle.py); configs/refnet.yaml's
// model warm-starts from its train_dir, taking what pstrain's bundle reader gives.
TEST(WarmStartTest, RefNetWarmStartsFromATrainDirTensorFlowsSaverWrote) {
  const std::string python = pstrain::testing::TestPython();
  if (std::system(("'" + python + "' -c 'import tensorflow' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << python << " cannot import tensorflow (run scripts/test-venv.sh)";
  }
  const std::string dir = Dir("tf_saver");
  const std::string script = pstrain::testing::SourceDir() + "/tests/checkpoint/tf_write_bundle.py";
  ASSERT_EQ(std::system(("'" + python + "' '" + script + "' '" + dir + "' 77").c_str()), 0);
  auto file = ConfigNode::LoadFile(pstrain::testing::SourceDir() + "/configs/refnet.yaml");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto model = Model::FromConfig(file->Child("model").value());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  (*model)->InitVariables(1);
  const std::vector<float> fc2_initial = Value(model->get(), "fc2/weights").ToVector();
  Result<RestoreReport> r = WarmStart(dir, SplitList("fc2/*"), model->get());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->restored.size(), 6u);
  auto saved = ReadTfCheckpoint(dir + "/model.ckpt-77");
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  for (const char* name : {"conv1/weights", "conv2/weights", "fc1/weights", "conv2/bias"}) {
    EXPECT_EQ(Value(model->get(), name).ToVector(), saved->tensors.at(name).ToVector()) << name;
  }
  EXPECT_EQ(Value(model->get(), "fc2/weights").ToVector(), fc2_initial);
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
