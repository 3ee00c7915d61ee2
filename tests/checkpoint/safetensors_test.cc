#include "common/checkpoint/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "tests/checkpoint/test_util.h"

namespace pstrain {
namespace {

using testing_util::ReadBytes;
using testing_util::RunAndCapture;
using testing_util::ScriptPath;
using testing_util::SmallModel;
using testing_util::TestPython;

class SafetensorsTest : public testing_util::ScratchDirTest {};

std::string Hex(const Tensor& t) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  const auto* p = reinterpret_cast<const unsigned char*>(t.data());
  for (size_t i = 0; i < t.bytes(); ++i) {
    out += kDigits[p[i] >> 4];
    out += kDigits[p[i] & 15];
  }
  return out;
}

TEST_F(SafetensorsTest, HeaderFollowsThePublishedLayout) {
  CheckpointData d = SmallModel(42);
  const std::string path = Path("model.safetensors");
  ASSERT_TRUE(ExportSafetensors(d, path).ok());
  std::string bytes = ReadBytes(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  EXPECT_EQ(n % 8, 0u);
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["__metadata__"]["global_step"], "42");
  EXPECT_EQ(header["__metadata__"]["model"], "smallnet");
  uint64_t next = 0;
  for (const auto& [name, tensor] : d.tensors) {  // contiguous, in name order
    const nlohmann::json& e = header.at(name);
    EXPECT_EQ(e["dtype"], "F32");
    EXPECT_EQ(e["shape"].get<std::vector<int64_t>>(), tensor.shape().dims());
    EXPECT_EQ(e["data_offsets"][0].get<uint64_t>(), next);
    next += tensor.bytes();
    EXPECT_EQ(e["data_offsets"][1].get<uint64_t>(), next);
    EXPECT_EQ(std::memcmp(bytes.data() + 8 + n + e["data_offsets"][0].get<uint64_t>(),
                          tensor.data(), tensor.bytes()),
              0)
        << name;
  }
  EXPECT_EQ(bytes.size(), 8 + n + next);
}

TEST_F(SafetensorsTest, ATensorNameThatIsNotUtf8IsRefusedNamingTheFile) {
  CheckpointData d = SmallModel(42);
  d.tensors["conv\xff/w"] = Tensor(Shape{2});
  const std::string path = Path("model.safetensors");
  const Status s = ExportSafetensors(d, path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("safetensors export '" + path +
                             "': tensor names and metadata must be UTF-8"),
            std::string::npos)
      << s.ToString();
}

TEST_F(SafetensorsTest, SafetensorsPythonPackageLoadsNamesShapesAndValues) {
  std::string why;
  std::string python = TestPython("safetensors.numpy, numpy", &why);
  if (python.empty()) GTEST_SKIP() << why;
  CheckpointData d = SmallModel(12345);
  d.tensors["scalar"] = Tensor::Filled(Shape{}, -2.5f);
  const std::string path = Path("model.safetensors");
  ASSERT_TRUE(ExportSafetensors(d, path).ok());

  int code = 0;
  std::string out = RunAndCapture(
      "'" + python + "' '" + ScriptPath("load_safetensors.py") + "' '" + path + "'", &code);
  ASSERT_EQ(code, 0) << out;
  nlohmann::json loaded = nlohmann::json::parse(out);
  EXPECT_EQ(loaded["metadata"]["global_step"], "12345");
  EXPECT_EQ(loaded["metadata"]["config_hash"], "9f2c");
  ASSERT_EQ(loaded["tensors"].size(), d.tensors.size());
  for (const auto& [name, tensor] : d.tensors) {
    ASSERT_TRUE(loaded["tensors"].contains(name)) << name;
    const nlohmann::json& t = loaded["tensors"][name];
    EXPECT_EQ(t["dtype"], "float32") << name;
    EXPECT_EQ(t["shape"].get<std::vector<int64_t>>(), tensor.shape().dims()) << name;
    EXPECT_EQ(t["hex"], Hex(tensor)) << name;
  }
}

TEST_F(SafetensorsTest, RejectsTensorWithoutBuffer) {
  CheckpointData d = SmallModel(1);
  d.tensors["ghost"] = Tensor();
  Status st = ExportSafetensors(d, Path("x.safetensors"));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("ghost"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(Path("x.safetensors")));
}

}  // namespace
}  // namespace pstrain
