// TensorFlow itself (tensorflow-cpu in the test venv) reads the bundles pstrain writes and
// writes the bundles pstrain reads: RefNet's variables, as bench's TF-1 graph names them, with
// Adam's slots, restored by a tf.compat.v1 Saver; damaged TF-written files are refused naming
// the file. Skipped when the venv lacks TensorFlow (scripts/test-venv.sh installs it).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/checkpoint/checkpoint_manager.h"
#include "common/checkpoint/safetensors.h"
#include "common/checkpoint/tf_bundle.h"
#include "common/checkpoint/tf_checkpoint.h"
#include "common/little_endian.h"
#include "tests/checkpoint/test_util.h"

namespace pstrain {
namespace {

using testing_util::BitwiseEqual;
using testing_util::Pattern;
using testing_util::ReadBytes;
using testing_util::RunAndCapture;
using testing_util::ScratchDirTest;
using testing_util::ScriptPath;
using testing_util::TestPython;
using testing_util::WriteBytes;

// RefNet in pstrain's layouts: conv [out, in, kh, kw], dense [units, features], Adam's m and v.
CheckpointData RefNet(int64_t step) {
  const std::map<std::string, Shape> shapes = {
      {"conv1/weights", Shape{32, 1, 5, 5}},  {"conv1/bias", Shape{32}},
      {"conv2/weights", Shape{64, 32, 5, 5}}, {"conv2/bias", Shape{64}},
      {"fc1/weights", Shape{1024, 3136}},     {"fc1/bias", Shape{1024}},
      {"fc2/weights", Shape{10, 1024}},       {"fc2/bias", Shape{10}}};
  CheckpointData d;
  d.global_step = step;
  float seed = 0;
  for (const auto& [name, shape] : shapes) {
    d.tensors[name] = Pattern(shape, seed += 1);
    d.tensors[name + "/m"] = Pattern(shape, seed += 1);
    d.tensors[name + "/v"] = Pattern(shape, seed += 1);
  }
  return d;
}

// A safetensors file's float32 tensors (the Python side's expected values).
std::map<std::string, Tensor> LoadSafetensors(const std::string& path) {
  const std::string bytes = ReadBytes(path);
  const uint64_t header_bytes = little_endian::Get64(bytes.data());
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, header_bytes));
  std::map<std::string, Tensor> out;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    EXPECT_EQ(entry["dtype"], "F32") << name;
    Tensor t = Tensor::Uninitialized(Shape(entry["shape"].get<std::vector<int64_t>>()));
    const uint64_t begin = entry["data_offsets"][0].get<uint64_t>();
    std::memcpy(t.data(), bytes.data() + 8 + header_bytes + begin, t.bytes());
    out[name] = std::move(t);
  }
  return out;
}

class TfInteropTest : public ScratchDirTest {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    std::string why;
    python_ = TestPython("tensorflow, safetensors.numpy", &why);
    if (python_.empty()) GTEST_SKIP() << why;
  }

  std::string Run(const std::string& script, const std::string& args) {
    int code = 0;
    std::string out =
        RunAndCapture("'" + python_ + "' '" + ScriptPath(script) + "' " + args, &code);
    EXPECT_EQ(code, 0) << out;
    return out;
  }

  // TensorFlow saves RefNet at `step` in dir_; its values in pstrain's names and layouts.
  std::map<std::string, Tensor> TensorFlowSaves(int64_t step) {
    Run("tf_write_bundle.py", "'" + dir_ + "' " + std::to_string(step));
    return LoadSafetensors(Path("expected.safetensors"));
  }

  std::string python_;
};

TEST_F(TfInteropTest, TensorFlowListsLoadsAndSaverRestoresWhatPstrainWrote) {
  const CheckpointData d = RefNet(2808);
  ASSERT_TRUE(ExportSafetensors(d, Path("expected.safetensors")).ok());
  const std::string prefix = Path("tf/model.ckpt-2808");
  std::filesystem::create_directories(Path("tf"));
  ASSERT_TRUE(WriteTfCheckpoint(prefix, d).ok());
  const std::string out =
      Run("tf_read_bundle.py", "'" + prefix + "' '" + Path("expected.safetensors") + "' 2808");
  nlohmann::json result = nlohmann::json::parse(out.substr(out.rfind('{')));
  EXPECT_EQ(result["problems"], nlohmann::json::array()) << result.dump(1);
  // 24 tensors through load_checkpoint and again through the Saver's graph.
  EXPECT_EQ(result["checked"], 48);
}

TEST_F(TfInteropTest, PstrainReadsWhatTensorFlowsSaverWroteSlotsAndStepToo) {
  const std::map<std::string, Tensor> expected = TensorFlowSaves(123);
  ASSERT_EQ(expected.size(), 24u);  // 8 variables, each with Adam's two slots
  ASSERT_TRUE(IsTfBundle(Path("model.ckpt-123")));
  for (const auto& data :
       {ReadTfCheckpoint(Path("model.ckpt-123")), CheckpointManager(dir_, 0).RestoreLatest()}) {
    ASSERT_TRUE(data.ok()) << data.status().ToString();
    EXPECT_EQ(data->global_step, 123);
    EXPECT_EQ(data->tensors.size(), expected.size());
    for (const auto& [name, t] : expected) {
      ASSERT_TRUE(data->tensors.count(name)) << name;
      EXPECT_TRUE(BitwiseEqual(data->tensors.at(name), t)) << name;
    }
  }
  EXPECT_EQ(expected.at("conv2/weights").shape(), (Shape{64, 32, 5, 5}));
}

TEST_F(TfInteropTest, DamagedTensorFlowIndexOrDataIsAnErrorNamingTheFile) {
  TensorFlowSaves(5);
  const std::string prefix = Path("model.ckpt-5");
  const std::string data_path = BundleDataPath(prefix, 0, 1);
  const std::string data = ReadBytes(data_path);
  std::string bad = data;
  bad[bad.size() / 2] ^= 0x01;
  WriteBytes(data_path, bad);
  auto read = ReadTfCheckpoint(prefix);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(read.status().message().find(data_path + ": checksum mismatch"), std::string::npos)
      << read.status().ToString();
  WriteBytes(data_path, data);

  const std::string index = ReadBytes(prefix + ".index");
  WriteBytes(prefix + ".index", index.substr(0, index.size() / 2));
  read = ReadTfCheckpoint(prefix);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find(prefix + ".index: "), std::string::npos)
      << read.status().ToString();
}

}  // namespace
}  // namespace pstrain
