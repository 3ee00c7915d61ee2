// Malformed messages sent raw by a plain ZeroMQ DEALER: each must come out of
// ServerSocket::Receive as an Incoming whose message is an error naming the problem, and the
// server must answer a good message right after.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "common/wire/codec.h"
#include "common/wire/transport.h"
#include "tests/wire/wire_test_util.h"

namespace pstrain {
namespace wire {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kWait(10000);

class MalformedMessageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    limits_.max_header_bytes = 4096;
    limits_.max_frames = 16;
    limits_.max_tensor_bytes = 1 << 20;
    limits_.max_total_bytes = 4 << 20;
    auto server = ServerSocket::Bind("tcp://127.0.0.1:0", limits_);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    raw_ = std::make_unique<RawDealer>(server_->endpoint());
    auto conn = Connection::Connect(server_->endpoint());
    ASSERT_TRUE(conn.ok());
    good_ = std::move(conn).value();
  }

  // Sends `frames` raw and expects Receive to answer with `code` and a message containing
  // `expected`; then checks that a good message still gets through.
  void ExpectRefused(const std::vector<std::string>& frames, StatusCode code,
                     const std::string& expected) {
    raw_->Send(frames);
    Result<Incoming> in = server_->Receive(kWait);
    ASSERT_TRUE(in.ok()) << in.status().ToString();
    EXPECT_FALSE(in->peer.empty()) << "the sender must be known so it can be answered";
    ASSERT_FALSE(in->message.ok()) << "a malformed message was decoded";
    EXPECT_EQ(in->message.status().code(), code) << in->message.status().ToString();
    EXPECT_NE(in->message.status().message().find(expected), std::string::npos)
        << "error: " << in->message.status().message() << "\nexpected to contain: " << expected;
    ExpectServerStillWorks();
  }

  void ExpectServerStillWorks() {
    Message ping;
    ping.type = MessageType::kRegister;
    ping.tensors = {{"w", RandomBitsTensor({4}, 1)}};
    ASSERT_TRUE(good_->Send(ping).ok());
    Result<Incoming> in = server_->Receive(kWait);
    ASSERT_TRUE(in.ok()) << in.status().ToString();
    ASSERT_TRUE(in->message.ok()) << in->message.status().ToString();
    EXPECT_EQ(in->message->type, MessageType::kRegister);
  }

  // A valid header with one tensor "w" of `dims` declaring `byte_length` bytes.
  static std::string OneTensorHeader(const std::vector<int64_t>& dims, uint64_t byte_length) {
    return RawHeader([&](schema::Header::Builder h) {
      SetMeta(h.getBody().initWorker().initPush().initTensors(1)[0], "w", dims, byte_length);
    });
  }

  MessageLimits limits_;
  std::unique_ptr<ServerSocket> server_;
  std::unique_ptr<RawDealer> raw_;
  std::unique_ptr<Connection> good_;
};

TEST_F(MalformedMessageTest, RandomGarbageHeaderIsNotCapnProto) {
  std::mt19937 rng(7);
  std::string garbage(64, '\0');
  for (char& c : garbage) c = static_cast<char>(rng());
  ExpectRefused({garbage}, StatusCode::kDataLoss, "not a valid Cap'n Proto message");
}

TEST_F(MalformedMessageTest, HeaderNotAMultipleOfEightBytes) {
  ExpectRefused({"hello"}, StatusCode::kDataLoss, "header frame is 5 bytes");
}

TEST_F(MalformedMessageTest, TruncatedHeaderIsNotCapnProto) {
  std::string header = RawHeader([](schema::Header::Builder h) {
    h.getBody().initWorker().initBarrier().setName(
        "a text long enough that cutting the message in half loses part of it");
  });
  header.resize(header.size() / 16 * 8);
  ExpectRefused({header}, StatusCode::kDataLoss, "not a valid Cap'n Proto message");
}

TEST_F(MalformedMessageTest, WrongVersionNamesBothVersionsAndTheSender) {
  const std::string header = RawHeader([](schema::Header::Builder h) {
    h.setVersion(kProtocolVersion + 1);
    h.setRole("worker");
    h.setTaskIndex(1);
  });
  ExpectRefused({header}, StatusCode::kInvalidArgument,
                "protocol version " + std::to_string(kProtocolVersion + 1) +
                    " from worker 1, this server speaks " + std::to_string(kProtocolVersion));
}

TEST_F(MalformedMessageTest, OlderPeersAreRefusedNamingBothVersions) {
  // Two releases spoke protocol 6: the one flat header with bfloat16 tensor frames, and the first
  // schema per protocol, without them; 7 had no embedding-table rows; 8 no head's tags on
  // records; 9's tags cover no state digest. A process of any of them meets one of this release,
  // which would read its header as something else.
  for (uint32_t version : {6u, 7u, 8u, 9u}) {
    const std::string header = RawHeader([version](schema::Header::Builder h) {
      h.setVersion(version);
      h.setRole("chief");
      h.setTaskIndex(0);
      h.getBody().initWorker().initRegister();
    });
    ExpectRefused({header}, StatusCode::kInvalidArgument,
                  "protocol version " + std::to_string(version) +
                      " from chief 0, this server speaks " + std::to_string(kProtocolVersion));
  }
}

TEST_F(MalformedMessageTest, UnknownMessageType) {
  const std::string request = RawHeader([](schema::Header::Builder h) {
    SetWhich<schema::WorkerRequest>(h.getBody().initWorker(), 42);
  });
  ExpectRefused({request}, StatusCode::kInvalidArgument,
                "unknown worker request 42 from an unnamed peer; known are 0 (register) to 11 "
                "(row push)");
  const std::string protocol =
      RawHeader([](schema::Header::Builder h) { SetWhich<schema::Header::Body>(h, 42); });
  ExpectRefused({protocol}, StatusCode::kInvalidArgument,
                "unknown protocol 42 from an unnamed peer; known are 0 (worker) to 4 (error)");
}

TEST_F(MalformedMessageTest, AReplyIsNoRequest) {
  const std::string header = RawHeader([](schema::Header::Builder h) {
    h.setRequestId(12);
    h.getBody().initOk().setValue(1);
  });
  raw_->Send({header});
  Result<Incoming> in = server_->Receive(kWait);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  ASSERT_FALSE(in->message.ok());
  EXPECT_NE(in->message.status().message().find("ok is a reply, not a request"), std::string::npos)
      << in->message.status().message();
  EXPECT_EQ(in->request_id, 12u) << "its error reply must reach the caller";
  ExpectServerStillWorks();
}

TEST_F(MalformedMessageTest, FewerTensorFramesThanTheHeaderLists) {
  const std::string header = RawHeader([](schema::Header::Builder h) {
    auto metas = h.getBody().initWorker().initRegister().initTensors(2);
    SetMeta(metas[0], "a", {2}, 8);
    SetMeta(metas[1], "b", {2}, 8);
  });
  ExpectRefused({header, std::string(8, 'x')}, StatusCode::kDataLoss,
                "lists 2 tensors but 1 tensor frames came with it");
}

TEST_F(MalformedMessageTest, TensorFrameShorterThanItsShape) {
  ExpectRefused({OneTensorHeader({2, 3}, 24), std::string(20, 'x')}, StatusCode::kDataLoss,
                "tensor 'w' frame is 20 bytes but its shape [2,3] of float32 needs 24");
}

TEST_F(MalformedMessageTest, TensorFrameLargerThanItsShape) {
  ExpectRefused({OneTensorHeader({2, 3}, 24), std::string(28, 'x')}, StatusCode::kDataLoss,
                "tensor 'w' frame is 28 bytes but its shape [2,3] of float32 needs 24");
}

TEST_F(MalformedMessageTest, DeclaredByteLengthDisagreesWithShape) {
  ExpectRefused({OneTensorHeader({2, 3}, 20), std::string(24, 'x')}, StatusCode::kDataLoss,
                "tensor 'w' declares 20 bytes but its shape [2,3] of float32 needs 24");
}

TEST_F(MalformedMessageTest, HugeDeclaredDimsAreRefusedWithoutOverflow) {
  ExpectRefused({OneTensorHeader({int64_t{1} << 40, int64_t{1} << 40, 0}, 0), std::string()},
                StatusCode::kInvalidArgument, "is larger than max_tensor_bytes=1048576");
}

TEST_F(MalformedMessageTest, NegativeDim) {
  ExpectRefused({OneTensorHeader({2, -3}, 0), std::string()}, StatusCode::kInvalidArgument,
                "tensor 'w' dim 1 is -3");
}

TEST_F(MalformedMessageTest, EmptyVariableName) {
  const std::string header = RawHeader([](schema::Header::Builder h) {
    h.setRole("worker");
    h.setTaskIndex(0);
    auto names = h.getBody().initWorker().initPull().initNames(2);
    names.set(0, "fc/w");
    names.set(1, "");
  });
  ExpectRefused({header}, StatusCode::kInvalidArgument, "name 1 of 2 in the pull from worker 0");
}

TEST_F(MalformedMessageTest, EmptyTensorName) {
  ExpectRefused({RawHeader([](schema::Header::Builder h) {
                   SetMeta(h.getBody().initWorker().initRegister().initTensors(1)[0], "", {1}, 4);
                 }),
                 std::string(4, 'x')},
                StatusCode::kInvalidArgument, "tensor 0 of 1 in the register from an unnamed peer");
}

TEST_F(MalformedMessageTest, TooManyFrames) {
  std::vector<std::string> frames(20, std::string(8, '\0'));
  ExpectRefused(frames, StatusCode::kInvalidArgument,
                "message has 20 frames, above the limit max_frames=16");
}

TEST_F(MalformedMessageTest, TooManyBytesInAll) {
  std::vector<std::string> frames(6, std::string(1 << 20, '\0'));
  ExpectRefused(frames, StatusCode::kInvalidArgument, "above the limit max_total_bytes=4194304");
}

TEST_F(MalformedMessageTest, HeaderOverTheLimit) {
  const std::string header = RawHeader([](schema::Header::Builder h) {
    h.getBody().initWorker().initBarrier().setName(std::string(8000, 't'));
  });
  ExpectRefused({header}, StatusCode::kInvalidArgument, "above the limit max_header_bytes=4096");
}

// A frame above ZMQ_MAXMSGSIZE never reaches us: ZeroMQ drops it (and that connection) while
// reading, before buffering it whole.
TEST_F(MalformedMessageTest, FrameAboveMaxMsgSizeIsDroppedByZeroMq) {
  raw_->Send({OneTensorHeader({1 << 19}, 2 << 20), std::string(2 << 20, 'x')});
  Result<Incoming> in = server_->Receive(milliseconds(300));
  ASSERT_FALSE(in.ok());
  EXPECT_NE(in.status().message().find("timeout"), std::string::npos);
  ExpectServerStillWorks();
}

}  // namespace
}  // namespace wire
}  // namespace pstrain
