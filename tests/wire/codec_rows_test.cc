// The row types on the wire: ids in a frame of their own ahead of the gradient rows, and every
// check a server relies on made while decoding (the count the frame holds, ids >= 0, one
// gradient of a row per id), so a bad row request is refused before anything is buffered.
#include <gtest/gtest.h>

#include <cstring>

#include "common/wire/codec.h"
#include "tests/wire/wire_test_util.h"

namespace pstrain {
namespace wire {
namespace {

Message RowPush() { return ExampleOf(MessageType::kRowPush); }

// `m` encoded, then its frames with frame `index` replaced by `bytes` (kept alive by the frame).
std::vector<Frame> WithFrame(const Message& m, size_t index, std::string bytes) {
  Result<EncodedMessage> encoded = Encode(m);
  EXPECT_TRUE(encoded.ok()) << encoded.status().ToString();
  std::vector<Frame> frames = FramesOf(*encoded);
  auto keep = std::make_shared<const std::string>(std::move(bytes));
  frames.at(index) = {keep->data(), keep->size(), keep};
  return frames;
}

std::string IdBytes(const std::vector<int64_t>& ids) {
  std::string bytes(ids.size() * sizeof(int64_t), '\0');
  if (!ids.empty()) std::memcpy(bytes.data(), ids.data(), bytes.size());
  return bytes;
}

TEST(CodecRowsTest, IdsTravelAsOneFrameAheadOfTheRows) {
  const Message m = RowPush();
  Result<EncodedMessage> encoded = Encode(m);
  ASSERT_TRUE(encoded.ok()) << encoded.status().ToString();
  ASSERT_EQ(encoded->tensor_frames.size(), 2u);
  EXPECT_EQ(encoded->tensor_frames[0].size, m.ids.size() * sizeof(int64_t));
  EXPECT_EQ(std::memcmp(encoded->tensor_frames[0].data, m.ids.data(), m.ids.size() * 8), 0);
  EXPECT_EQ(encoded->tensor_frames[1].size, m.tensors[0].tensor.bytes());
  Result<Message> decoded = Decode(FramesOf(*encoded), {}, "ps 0", Expect::kRequest);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  ExpectSameMessage(m, *decoded);
}

TEST(CodecRowsTest, AnIdsFrameThatDisagreesWithItsCountIsRefused) {
  const Message m = RowPush();
  std::vector<int64_t> fewer(m.ids.begin(), m.ids.end() - 1);
  Result<Message> decoded = Decode(WithFrame(m, 1, IdBytes(fewer)));
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("lists 3 ids (24 bytes) but its ids frame is 16"),
            std::string::npos)
      << decoded.status().message();
  decoded = Decode(WithFrame(m, 1, IdBytes(m.ids) + "x"));
  EXPECT_FALSE(decoded.ok());
}

TEST(CodecRowsTest, ANegativeIdIsRefusedBothWays) {
  Message m = RowPush();
  std::vector<int64_t> ids = m.ids;
  ids[1] = -5;
  Result<Message> decoded = Decode(WithFrame(m, 1, IdBytes(ids)));
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("id -5 at position 1"), std::string::npos)
      << decoded.status().message();
  m.ids = ids;
  EXPECT_EQ(Encode(m).status().code(), StatusCode::kInvalidArgument);
}

// What a reader refuses is never written: Encode runs the reader's own check (CheckRowPush), so
// a sender finds its mistake at once and a peer's bytes meet the same rule on arrival.
TEST(CodecRowsTest, ARowPushNeedsOneGradientRowPerIdUnderTheTablesName) {
  Message fewer_rows = RowPush();
  fewer_rows.tensors[0].tensor = RandomBitsTensor({2, 8}, 9);
  Result<EncodedMessage> encoded = Encode(fewer_rows);
  ASSERT_FALSE(encoded.ok());
  EXPECT_NE(encoded.status().message().find("has gradient [2,8] for 3 ids; expected [3, dim"),
            std::string::npos)
      << encoded.status().message();
  Message renamed = RowPush();
  renamed.tensors[0].name = "other";
  encoded = Encode(renamed);
  ASSERT_FALSE(encoded.ok());
  EXPECT_NE(encoded.status().message().find("carries tensor 'other'; expected the table's name"),
            std::string::npos)
      << encoded.status().message();
  Message two = RowPush();
  two.tensors.push_back(two.tensors[0]);
  EXPECT_FALSE(Encode(two).ok());
  EXPECT_TRUE(Decode(FramesOf(Encode(RowPush()).value())).ok());
}

TEST(CodecRowsTest, AnIdCountBeyondTheTensorLimitIsRefusedBeforeReadingTheFrame) {
  MessageLimits limits;
  limits.max_tensor_bytes = 16;                  // two ids
  Message m = ExampleOf(MessageType::kRowPull);  // four ids
  Result<Message> decoded = Decode(FramesOf(Encode(m).value()), limits);
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("more than max_tensor_bytes=16"), std::string::npos)
      << decoded.status().message();
}

TEST(CodecRowsTest, OnlyTheRowTypesCarryIds) {
  Message pull = ExampleOf(MessageType::kPull);
  pull.ids = {1};
  Result<EncodedMessage> encoded = Encode(pull);
  ASSERT_FALSE(encoded.ok());
  EXPECT_NE(encoded.status().message().find("carries no 'ids'"), std::string::npos)
      << encoded.status().message();
}

}  // namespace
}  // namespace wire
}  // namespace pstrain
