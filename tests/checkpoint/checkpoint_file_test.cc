#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>

#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/checkpoint_manager.h"
#include "tests/checkpoint/test_util.h"

namespace pstrain {
namespace {

using testing_util::BitwiseEqual;
using testing_util::Pattern;
using testing_util::ReadBytes;
using testing_util::SmallModel;
using testing_util::WriteBytes;

class CheckpointFileTest : public testing_util::ScratchDirTest {};

TEST_F(CheckpointFileTest, RoundTripKeepsNamesShapesBitsStepAndMetadata) {
  CheckpointData in = SmallModel(int64_t{1} << 40);
  // Values whose bits a text or lossy path would change.
  Tensor odd = Tensor::Uninitialized(Shape{5});
  odd[0] = std::numeric_limits<float>::quiet_NaN();
  odd[1] = std::numeric_limits<float>::infinity();
  odd[2] = -0.0f;
  odd[3] = std::numeric_limits<float>::denorm_min();
  odd[4] = -std::numeric_limits<float>::max();
  in.tensors["odd/values"] = odd;
  in.tensors["scalar"] = Tensor::Filled(Shape{}, 3.5f);
  in.tensors["empty"] = Tensor(Shape{0, 7});
  in.metadata["quote\"and\nnewline"] = "ünïcode \\ value";
  ASSERT_TRUE(WriteCheckpoint(Path("model.ckpt-1"), in).ok());

  Result<CheckpointData> out = ReadCheckpoint(Path("model.ckpt-1"));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->global_step, int64_t{1} << 40);
  EXPECT_EQ(out->metadata, in.metadata);
  ASSERT_EQ(out->tensors.size(), in.tensors.size());
  for (const auto& [name, tensor] : in.tensors) {
    ASSERT_EQ(out->tensors.count(name), 1u) << name;
    EXPECT_TRUE(BitwiseEqual(out->tensors.at(name), tensor)) << name;
  }
}

TEST_F(CheckpointFileTest, AMetadataValueThatIsNotUtf8IsRefusedNamingTheFile) {
  CheckpointData d = SmallModel(7);
  d.metadata["model"] = "small\xffnet";
  const std::string path = Path("bad.ckpt");
  const Status s = WriteCheckpoint(path, d);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("checkpoint '" + path + "': tensor names and metadata must be UTF-8"),
            std::string::npos)
      << s.ToString();
}

TEST_F(CheckpointFileTest, TensorDataStartsOn64ByteBoundaries) {
  CheckpointData in;
  in.tensors["a"] = Tensor::Filled(Shape{3}, 1234.5f);  // 12 bytes: the next must be padded
  in.tensors["b"] = Tensor::Filled(Shape{5}, -77.25f);
  ASSERT_TRUE(WriteCheckpoint(Path("aligned"), in).ok());
  std::string bytes = ReadBytes(Path("aligned"));
  for (const auto& [name, tensor] : in.tensors) {
    std::string needle(reinterpret_cast<const char*>(tensor.data()), tensor.bytes());
    size_t at = bytes.find(needle);
    ASSERT_NE(at, std::string::npos) << name;
    EXPECT_EQ(at % 64, 0u) << name << " starts at byte " << at;
  }
}

TEST_F(CheckpointFileTest, FlippingAnyByteIsDataLossNamingTheFile) {
  const std::string path = Path("model.ckpt-200");
  ASSERT_TRUE(WriteCheckpoint(path, SmallModel(200)).ok());
  const std::string good = ReadBytes(path);
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] ^= 0x10;
    WriteBytes(path, bad);
    Result<CheckpointData> r = ReadCheckpoint(path);
    ASSERT_FALSE(r.ok()) << "flipped byte " << i << " of " << good.size() << " went unnoticed";
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss)
        << "byte " << i << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().ToString();
  }
}

TEST_F(CheckpointFileTest, FlippedDataByteReportsChecksumMismatch) {
  const std::string path = Path("model.ckpt-200");
  CheckpointData in = SmallModel(200);
  ASSERT_TRUE(WriteCheckpoint(path, in).ok());
  std::string bytes = ReadBytes(path);
  const Tensor& w = in.tensors.at("fc2/weights");
  size_t at = bytes.find(std::string(reinterpret_cast<const char*>(w.data()), w.bytes()));
  ASSERT_NE(at, std::string::npos);
  bytes[at + 17] ^= 0x01;
  WriteBytes(path, bytes);
  Result<CheckpointData> r = ReadCheckpoint(path);
  ASSERT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find(path + ": checksum mismatch (stored 0x"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find(", computed 0x"), std::string::npos);
}

TEST_F(CheckpointFileTest, TruncatedFileIsDataLoss) {
  const std::string path = Path("model.ckpt-5");
  ASSERT_TRUE(WriteCheckpoint(path, SmallModel(5)).ok());
  const std::string good = ReadBytes(path);
  for (size_t length :
       {size_t{0}, size_t{10}, size_t{30}, good.size() / 2, good.size() - 16, good.size() - 1}) {
    WriteBytes(path, good.substr(0, length));
    Result<CheckpointData> r = ReadCheckpoint(path);
    ASSERT_EQ(r.status().code(), StatusCode::kDataLoss) << "length " << length;
    EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
  }
}

TEST_F(CheckpointFileTest, TrailingBytesAreDataLoss) {
  const std::string path = Path("model.ckpt-5");
  ASSERT_TRUE(WriteCheckpoint(path, SmallModel(5)).ok());
  WriteBytes(path, ReadBytes(path) + "extra");
  EXPECT_EQ(ReadCheckpoint(path).status().code(), StatusCode::kDataLoss);
}

TEST_F(CheckpointFileTest, BadMagicIsDataLoss) {
  const std::string path = Path("not-a-checkpoint");
  ASSERT_TRUE(WriteCheckpoint(path, SmallModel(5)).ok());
  std::string bytes = ReadBytes(path);
  bytes.replace(0, 8, "GARBAGE!");
  WriteBytes(path, bytes);
  Result<CheckpointData> r = ReadCheckpoint(path);
  ASSERT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(r.status().message(),
            path + ": bad magic (not a pstrain checkpoint; expected \"PSTCKPT\")");
}

TEST_F(CheckpointFileTest, MissingFileIsNotFound) {
  Result<CheckpointData> r = ReadCheckpoint(Path("model.ckpt-404"));
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("model.ckpt-404"), std::string::npos);
}

TEST_F(CheckpointFileTest, WriteLeavesOnlyTheFinalFile) {
  ASSERT_TRUE(WriteCheckpoint(Path("model.ckpt-1"), SmallModel(1)).ok());
  ASSERT_TRUE(WriteCheckpoint(Path("model.ckpt-1"), SmallModel(2, 5.0f)).ok());  // overwrite
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    names.push_back(e.path().filename());
  }
  EXPECT_EQ(names, std::vector<std::string>{"model.ckpt-1"});
  EXPECT_EQ(ReadCheckpoint(Path("model.ckpt-1"))->global_step, 2);
}

TEST_F(CheckpointFileTest, FailedWriteKeepsThePreviousFile) {
  const std::string path = Path("model.ckpt-1");
  ASSERT_TRUE(WriteCheckpoint(path, SmallModel(1)).ok());
  CheckpointData broken = SmallModel(2);
  broken.tensors["zz/no_buffer"] = Tensor();
  Status st = WriteCheckpoint(path, broken);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("zz/no_buffer"), std::string::npos) << st.message();
  EXPECT_EQ(ReadCheckpoint(path)->global_step, 1);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_),
                          std::filesystem::directory_iterator()),
            1);
}

// RefNet: ~3.3M floats of variables plus Adam's two slots, about 40 MB.
TEST_F(CheckpointFileTest, SavingFortyMegabytesTakesWellUnderASecond) {
  CheckpointData d;
  d.global_step = 1000;
  const std::vector<std::pair<std::string, Shape>> layers = {
      {"conv1", Shape{64, 3, 3, 3}},    {"conv2", Shape{128, 64, 3, 3}},
      {"conv3", Shape{256, 128, 3, 3}}, {"conv4", Shape{256, 256, 3, 3}},
      {"fc1", Shape{1024, 2304}},       {"fc2", Shape{10, 1024}}};
  int64_t floats = 0;
  for (const auto& [layer, shape] : layers) {
    for (const char* slot : {"", "/Adam_m", "/Adam_v"}) {
      d.tensors[layer + "/weights" + slot] = Pattern(shape, 0.5f);
      d.tensors[layer + "/bias" + slot] = Pattern(Shape{shape.dim(0)}, 0.25f);
      floats += shape.num_elements() + shape.dim(0);
    }
  }
  ASSERT_GT(floats * 4, 38'000'000);
  CheckpointManager manager(dir_, 5);
  auto start = std::chrono::steady_clock::now();
  Result<std::string> path = manager.Save(d);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(path.ok()) << path.status().ToString();
  std::printf("saved %.1f MB in %.3f s (fsync included)\n", floats * 4 / 1e6, seconds);
  EXPECT_LT(seconds, 1.0);

  start = std::chrono::steady_clock::now();
  Result<CheckpointData> back = ReadCheckpoint(*path);
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  std::printf("read and verified it in %.3f s\n", seconds);
  EXPECT_TRUE(BitwiseEqual(back->tensors.at("fc1/weights/Adam_v"), d.tensors.at("fc1/weights")));
}

}  // namespace
}  // namespace pstrain
