#include "common/wire/codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>

#include "tests/wire/wire_test_util.h"

namespace pstrain {
namespace wire {
namespace {

// A push with every field its struct holds.
Message FullMessage() { return ExampleOf(MessageType::kPush); }

TEST(CodecTest, EncodeThenDecodeKeepsEveryField) {
  for (MessageType type : AllMessageTypes()) {
    const Message m = ExampleOf(type);
    Result<EncodedMessage> encoded = Encode(m);
    ASSERT_TRUE(encoded.ok()) << encoded.status().ToString();
    Result<Message> decoded = Decode(FramesOf(*encoded));
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    ExpectSameMessage(m, *decoded);
  }
}

TEST(CodecTest, ErrorReplyCarriesItsStatusCode) {
  Message request;
  request.request_id = 9;
  Result<EncodedMessage> encoded = Encode(ErrorReply(request, NotFound("no variable 'w'")));
  ASSERT_TRUE(encoded.ok());
  Result<Message> decoded = Decode(FramesOf(*encoded));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->request_id, 9u);
  const Status status = StatusOfReply(*decoded);
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "no variable 'w'");
}

TEST(CodecTest, LargeTensorIsDecodedInPlaceAndHoldsItsFrame) {
  Message m;
  m.tensors = {{"w", RandomBitsTensor({1 << 16}, 5)}};
  Result<EncodedMessage> encoded = Encode(m);
  ASSERT_TRUE(encoded.ok());
  std::vector<Frame> frames = FramesOf(*encoded);
  const void* frame_data = frames[1].data;
  std::weak_ptr<const void> frame_owner = frames[1].owner;
  Result<Message> decoded = Decode(frames);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->tensors[0].tensor.data(), frame_data);
  frames.clear();
  EXPECT_FALSE(frame_owner.expired()) << "the decoded tensor must keep its frame alive";
  decoded = Internal("dropped");
  EXPECT_TRUE(frame_owner.expired()) << "the frame must be released with the tensor";
}

TEST(CodecTest, SmallOrUnalignedTensorFramesAreCopied) {
  const Tensor small = RandomBitsTensor({16}, 6);
  Message m;
  m.tensors = {{"b", small}};
  Result<EncodedMessage> encoded = Encode(m);
  ASSERT_TRUE(encoded.ok());
  std::vector<Frame> frames = FramesOf(*encoded);
  Result<Message> decoded = Decode(frames);
  ASSERT_TRUE(decoded.ok());
  EXPECT_NE(decoded->tensors[0].tensor.data(), frames[1].data);

  // A large frame one byte off float alignment.
  const Tensor big = RandomBitsTensor({1 << 14}, 7);
  std::vector<char> shifted(big.bytes() + 1);
  std::memcpy(shifted.data() + 1, big.data(), big.bytes());
  m.tensors = {{"w", big}};
  encoded = Encode(m);
  ASSERT_TRUE(encoded.ok());
  frames = FramesOf(*encoded);
  frames[1].data = shifted.data() + 1;
  decoded = Decode(frames);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(decoded->tensors[0].tensor.data()) % alignof(float), 0u);
  EXPECT_TRUE(BitwiseEqual(decoded->tensors[0].tensor, big));
}

TEST(CodecTest, UnalignedHeaderIsCopiedAndDecodes) {
  Result<EncodedMessage> encoded = Encode(FullMessage());
  ASSERT_TRUE(encoded.ok());
  std::vector<Frame> frames = FramesOf(*encoded);
  std::vector<char> shifted(encoded->header.size() + 1);
  std::memcpy(shifted.data() + 1, encoded->header.data(), encoded->header.size());
  frames[0].data = shifted.data() + 1;
  Result<Message> decoded = Decode(frames);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->assigns, FullMessage().assigns);
}

TEST(CodecTest, EncodeRefusesEmptyNamesAndBufferlessTensors) {
  Message m;
  m.type = MessageType::kPull;
  m.names = {"a", ""};
  Result<EncodedMessage> encoded = Encode(m);
  ASSERT_FALSE(encoded.ok());
  EXPECT_NE(encoded.status().message().find("name 1 of the pull is empty"), std::string::npos);

  m.type = MessageType::kPush;
  m.names.clear();
  m.tensors = {{"w", Tensor()}};
  encoded = Encode(m);
  ASSERT_FALSE(encoded.ok());
  EXPECT_NE(encoded.status().message().find("'w'"), std::string::npos);
  EXPECT_NE(encoded.status().message().find("no buffer"), std::string::npos);
}

TEST(CodecTest, TrailingBytesAfterHeaderAreRefused) {
  Result<EncodedMessage> encoded = Encode(Message{});
  ASSERT_TRUE(encoded.ok());
  encoded->header.append(8, '\0');
  Result<Message> decoded = Decode(FramesOf(*encoded));
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(decoded.status().message().find("8 bytes after"), std::string::npos)
      << decoded.status().message();
}

TEST(CodecTest, UnknownErrorCodeIsRefused) {
  const std::string header =
      RawHeader([](schema::Header::Builder h) { h.getBody().initError().setErrorCode(999); });
  Result<Message> decoded = Decode({{header.data(), header.size(), nullptr}});
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("unknown error code 999"), std::string::npos);
}

TEST(CodecTest, EveryReplicationFieldSurvivesARoundTrip) {
  Message m;
  m.type = MessageType::kReplicaCopy;
  m.role = "ps";
  m.task_index = 2;
  m.shard = 7;
  m.map_epoch = (uint64_t{1} << 63) + 5;
  m.pushes = {{"worker", 1, 77, 9, -3, -1, "stale: computed from step 1"},
              {"chief", 0, uint64_t{1} << 60, 1, int64_t{1} << 50, 0, std::string("a\0b", 3)},
              {"", -1, 0, 0, 0, 0, ""}};
  m.uses = {{0, 58, 1024}, {-1, int64_t{1} << 40, -7}};
  m.link = std::string("\0link\xff", 6) + std::string(26, 'x');
  Result<EncodedMessage> encoded = Encode(m);
  ASSERT_TRUE(encoded.ok()) << encoded.status().ToString();
  Result<Message> decoded = Decode(FramesOf(*encoded));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->type, MessageType::kReplicaCopy);
  EXPECT_EQ(decoded->shard, 7);
  EXPECT_EQ(decoded->map_epoch, m.map_epoch);
  EXPECT_EQ(decoded->pushes, m.pushes);
  EXPECT_EQ(decoded->pushes[1].reply_text.size(), 3u) << "a NUL byte must not cut the text";
  EXPECT_EQ(decoded->uses, m.uses);
  EXPECT_EQ(decoded->link, m.link) << "binary, NUL bytes included";
  // The chains travel in a shard map set (and its reply).
  Message map;
  map.type = MessageType::kShardMap;
  map.chains = {{0, {0, 1, 2}, {3}}, {1, {1}, {}}, {-1, {}, {0, 1}}};
  Result<Message> map_back = Decode(FramesOf(Encode(map).value()));
  ASSERT_TRUE(map_back.ok()) << map_back.status().ToString();
  EXPECT_EQ(map_back->chains, map.chains);
  for (MessageType type :
       {MessageType::kReplicate, MessageType::kShardMap, MessageType::kDataLease}) {
    Message plain;
    plain.type = type;
    Result<Message> back = Decode(FramesOf(Encode(plain).value()));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->type, type);
    EXPECT_EQ(back->shard, -1) << "a message naming no shard is for the receiver's own";
    EXPECT_EQ(back->map_epoch, 0u);
    EXPECT_TRUE(back->pushes.empty() && back->chains.empty() && back->uses.empty());
  }
}

TEST(CodecTest, AbortedAndUninitializedTravelAndUninitializedIsTheLastKnownCode) {
  Message request;
  for (const Status& status :
       {Aborted("not the head of shard 1 at epoch 3"), Uninitialized("ps 0 holds no variables")}) {
    Result<Message> decoded = Decode(FramesOf(Encode(ErrorReply(request, status)).value()));
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(StatusOfReply(*decoded).code(), status.code());
    EXPECT_EQ(StatusOfReply(*decoded).ToString(), status.ToString());
  }
  constexpr int kLast = static_cast<int>(StatusCode::kUninitialized);
  const std::string header =
      RawHeader([](schema::Header::Builder h) { h.getBody().initError().setErrorCode(kLast + 1); });
  Result<Message> beyond = Decode({{header.data(), header.size(), nullptr}});
  ASSERT_FALSE(beyond.ok());
  EXPECT_NE(beyond.status().message().find("known codes are 0 to " + std::to_string(kLast)),
            std::string::npos)
      << beyond.status().message();
}

TEST(CodecTest, APushEntryRoleHoldingANulIsRefusedBothWays) {
  Message m;
  m.type = MessageType::kReplicate;
  m.pushes = {{std::string("work\0er", 7), 1, 5, 1, 0, 0, ""}};
  Result<EncodedMessage> encoded = Encode(m);
  ASSERT_FALSE(encoded.ok());
  EXPECT_NE(encoded.status().message().find("push entry 0 of the replicate names a role holding "
                                            "a NUL byte"),
            std::string::npos)
      << encoded.status().message();
  const std::string header = RawHeader([](schema::Header::Builder h) {
    h.setRole("ps");
    h.setTaskIndex(0);
    h.getBody().initReplication().initReplicate().initPushes(1)[0].setRole(
        capnp::Text::Reader("a\0b", 3));
  });
  Result<Message> decoded = Decode({{header.data(), header.size(), nullptr}});
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("push entry 0 of 1 in the replicate from ps 0"),
            std::string::npos)
      << decoded.status().message();
}

// Random byte flips, truncations, extensions, shortened and dropped or duplicated frames of a valid
// message must each decode or fail with an error, never crash (run under ASan/UBSan for the full
// value).
TEST(CodecTest, RandomMutationsOfAValidMessageNeverCrash) {
  Message m = FullMessage();
  m.tensors.pop_back();  // keep each iteration cheap
  Result<EncodedMessage> encoded = Encode(m);
  ASSERT_TRUE(encoded.ok());
  const std::vector<Frame> valid = FramesOf(*encoded);
  std::mt19937 rng(20240601);
  MessageLimits limits;
  limits.max_header_bytes = 1 << 16;
  int decoded_ok = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int iter = 0; iter < 20000; ++iter) {
    std::string header = encoded->header;
    std::vector<Frame> frames = valid;
    const int flips = 1 + rng() % 8;
    for (int f = 0; f < flips; ++f) {
      switch (rng() % 7) {
        case 0:
        case 1:
        case 2:  // flip bits in one byte
          header[rng() % header.size()] ^= static_cast<char>(1 + rng() % 255);
          break;
        case 3:  // truncate (often to a multiple of 8, so the parser sees it)
          header.resize((rng() % header.size()) & ~static_cast<size_t>(rng() % 2 ? 7 : 0));
          if (header.empty()) header.assign(8, '\0');
          break;
        case 4:  // append garbage words
          for (int i = 0; i < 8 * (1 + static_cast<int>(rng() % 4)); ++i) {
            header.push_back(static_cast<char>(rng()));
          }
          break;
        case 5:  // drop or duplicate a tensor frame
          if (frames.size() > 1 && rng() % 2) {
            frames.erase(frames.begin() + 1 + rng() % (frames.size() - 1));
          } else {
            frames.push_back(frames[rng() % frames.size()]);
          }
          break;
        case 6:  // shorten a tensor frame (a longer one would claim bytes that are not there)
          if (frames.size() > 1) {
            Frame& f = frames[1 + rng() % (frames.size() - 1)];
            f.size = rng() % 2 ? f.size / 2 : f.size - std::min<size_t>(f.size, 4);
          }
          break;
      }
    }
    // The header is copied into 8-byte-aligned storage half the time, to reach both paths.
    std::vector<uint64_t> aligned((header.size() + 7) / 8);
    if (rng() % 2) {
      std::memcpy(aligned.data(), header.data(), header.size());
      frames[0] = {aligned.data(), header.size(), nullptr};
    } else {
      frames[0] = {header.data(), header.size(), nullptr};
    }
    Result<Message> decoded = Decode(frames, limits);
    if (decoded.ok()) {
      ++decoded_ok;
      for (const NamedTensor& t : decoded->tensors) EXPECT_FALSE(t.name.empty());
    } else {
      EXPECT_FALSE(decoded.status().message().empty());
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  LOG(INFO) << "20000 mutations decoded in " << seconds << " s, " << decoded_ok << " decoded";
  EXPECT_LT(seconds, 5.0);
}

}  // namespace
}  // namespace wire
}  // namespace pstrain
