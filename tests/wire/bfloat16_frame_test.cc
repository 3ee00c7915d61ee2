// Tensor frames in bfloat16 (--push_dtype=bf16): 2 bytes an element on the wire, rounded to
// nearest even by Encode and widened back to float32 by Decode; a pull asks for its reply in it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "common/bfloat16.h"
#include "common/wire/codec.h"
#include "tests/wire/wire_test_util.h"

namespace pstrain {
namespace wire {
namespace {

Message PushOf(Tensor gradient, TensorDType dtype) {
  Message m;
  m.type = MessageType::kPush;
  m.role = "worker";
  m.task_index = 1;
  m.sequence = 1;
  m.tensors = {{"w", std::move(gradient), dtype}};
  return m;
}

Tensor Ramp(int64_t n) {
  Tensor t = Tensor::Uninitialized(Shape{n});
  for (int64_t i = 0; i < n; ++i) t[i] = std::sin(0.37f * static_cast<float>(i)) * 1e-3f;
  return t;
}

TEST(Bfloat16FrameTest, ATensorOfNFloatsTravelsIn2NBytesAndComesBackRounded) {
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{3000}, int64_t{1} << 16}) {
    const Tensor g = Ramp(n);
    Result<EncodedMessage> encoded = Encode(PushOf(g, TensorDType::kBfloat16));
    ASSERT_TRUE(encoded.ok()) << encoded.status().ToString();
    ASSERT_EQ(encoded->tensor_frames.size(), 1u);
    EXPECT_EQ(encoded->tensor_frames[0].size, static_cast<size_t>(2 * n)) << n << " elements";
    Result<Message> decoded = Decode(FramesOf(*encoded));
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    const NamedTensor& got = decoded->tensors[0];
    EXPECT_EQ(got.dtype, TensorDType::kBfloat16);
    EXPECT_EQ(WireBytes(got), static_cast<size_t>(2 * n));
    ASSERT_EQ(got.tensor.shape(), g.shape());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(got.tensor[i], RoundToBfloat16(g[i])) << "element " << i << " of " << n;
    }
    // The sender's tensor is left as it was.
    EXPECT_EQ(g[n - 1], Ramp(n)[n - 1]);
  }
}

TEST(Bfloat16FrameTest, AFloat32TensorStillTravelsIn4NBytesBitForBit) {
  const Tensor g = RandomBitsTensor({3000}, 11);
  Result<EncodedMessage> encoded = Encode(PushOf(g, TensorDType::kFloat32));
  ASSERT_TRUE(encoded.ok());
  EXPECT_EQ(encoded->tensor_frames[0].size, 4u * 3000);
  Result<Message> decoded = Decode(FramesOf(*encoded));
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->tensors[0].dtype, TensorDType::kFloat32);
  EXPECT_TRUE(BitwiseEqual(decoded->tensors[0].tensor, g));
}

TEST(Bfloat16FrameTest, NaNAndInfinitySurviveAndAnOddAddressDecodes) {
  Tensor g = Tensor::FromVector(Shape{4}, {std::numeric_limits<float>::quiet_NaN(),
                                           -std::numeric_limits<float>::infinity(), 1e-40f, -0.0f});
  Result<EncodedMessage> encoded = Encode(PushOf(g, TensorDType::kBfloat16));
  ASSERT_TRUE(encoded.ok());
  std::vector<Frame> frames = FramesOf(*encoded);
  std::vector<char> shifted(frames[1].size + 1);
  std::memcpy(shifted.data() + 1, frames[1].data, frames[1].size);
  frames[1].data = shifted.data() + 1;  // ZeroMQ puts frames at any offset
  Result<Message> decoded = Decode(frames);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const Tensor& t = decoded->tensors[0].tensor;
  EXPECT_TRUE(std::isnan(t[0]));
  EXPECT_EQ(t[1], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(t[2], RoundToBfloat16(1e-40f));
  EXPECT_TRUE(std::signbit(t[3]));
}

TEST(Bfloat16FrameTest, AFrameOfTheFloat32SizeIsRefusedNamingTheDtype) {
  const std::string header = RawHeader([](schema::Header::Builder h) {
    auto meta = h.getBody().initWorker().initPush().initTensors(1)[0];
    SetMeta(meta, "w", {8}, 32);
    meta.setDtype(schema::DType::BFLOAT16);
  });
  std::vector<char> frame(32);
  Result<Message> decoded =
      Decode({{header.data(), header.size(), nullptr}, {frame.data(), frame.size(), nullptr}});
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().message(),
            "tensor 'w' declares 32 bytes but its shape [8] of bfloat16 needs 16");
}

TEST(Bfloat16FrameTest, AnUnknownDtypeIsRefusedNamingTheKnownOnes) {
  const std::string header = RawHeader([](schema::Header::Builder h) {
    auto meta = h.getBody().initWorker().initPush().initTensors(1)[0];
    SetMeta(meta, "w", {2}, 8);
    meta.setDtype(static_cast<schema::DType>(7));
  });
  std::vector<char> frame(8);
  Result<Message> decoded =
      Decode({{header.data(), header.size(), nullptr}, {frame.data(), frame.size(), nullptr}});
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("tensor 'w'"), std::string::npos);
  EXPECT_NE(decoded.status().message().find("dtype 7; known dtypes are float32 (0) and bfloat16"),
            std::string::npos)
      << decoded.status().message();
}

TEST(Bfloat16FrameTest, APullAsksForItsReplyInBfloat16AndOnlyAPullMay) {
  Message pull;
  pull.type = MessageType::kPull;
  pull.names = {"w"};
  pull.pull_dtype = TensorDType::kBfloat16;
  Result<Message> decoded = Decode(FramesOf(Encode(pull).value()));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->pull_dtype, TensorDType::kBfloat16);

  // The dtype is a field of the pull's struct alone: a push has no place for it.
  Message push = PushOf(Ramp(4), TensorDType::kBfloat16);
  push.pull_dtype = TensorDType::kBfloat16;
  const Result<EncodedMessage> refused = Encode(push);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "a push carries no 'pullDtype' (its struct in pstrain.capnp has no place for it: "
            "another type's field)");
}

}  // namespace
}  // namespace wire
}  // namespace pstrain
