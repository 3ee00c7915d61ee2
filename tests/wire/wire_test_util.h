// Helpers for wire tests: tensors with random bit patterns, a message of each type carrying every
// field its struct holds, raw headers built straight from the schema (so tests can make what
// Encode never would), and a plain ZeroMQ DEALER that sends arbitrary frames to a ServerSocket.
#pragma once

#include <capnp/any.h>
#include <capnp/message.h>
#include <capnp/schema.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>
#include <zmq.h>

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "common/wire/message.h"
#include "common/wire/pstrain.capnp.h"

namespace pstrain {
namespace wire {

// Random 32-bit patterns, NaN payloads and negative zeros included, so only a bitwise equal
// copy compares equal.
inline Tensor RandomBitsTensor(Shape shape, uint32_t seed) {
  Tensor t = Tensor::Uninitialized(std::move(shape));
  std::mt19937 rng(seed);
  auto* bits = reinterpret_cast<uint32_t*>(t.data());
  for (int64_t i = 0; i < t.size(); ++i) bits[i] = rng();
  return t;
}

inline bool BitwiseEqual(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.bytes() == b.bytes() &&
         (a.bytes() == 0 || std::memcmp(a.data(), b.data(), a.bytes()) == 0);
}

// A message of `type` carrying the envelope and every field its type's struct holds, each unlike
// its default.
inline Message ExampleOf(MessageType type) {
  Message m;
  m.type = type;
  m.request_id = 0x1234567890abcdefULL;
  m.role = "worker";
  m.task_index = 3;
  m.incarnation = 77;
  m.shard = 2;
  m.map_epoch = uint64_t{1} << 63;
  const std::vector<NamedTensor> tensors = {{"conv1/w", RandomBitsTensor({4, 3, 5, 5}, 1)},
                                            {"scalar", RandomBitsTensor({}, 3)},
                                            {"empty", Tensor(Shape{0, 7})},
                                            {"big", RandomBitsTensor({64, 1024}, 4)}};
  switch (type) {
    case MessageType::kRegister:
      m.step = 5;
      m.tensors = tensors;
      break;
    case MessageType::kPull:
      m.names = {"conv1/w", "conv1/b"};
      break;
    case MessageType::kPush:
      m.step = -42;
      m.sequence = 9;
      m.value = int64_t{1} << 40;
      m.tensors = tensors;
      m.assigns = {"scalar"};
      m.uses = {{0, 58, 1024}, {-1, int64_t{1} << 40, -7}};
      break;
    case MessageType::kBarrier:
      m.text = "start";
      m.value = 3;
      break;
    case MessageType::kHeartbeat:
      m.text = "goodbye";
      break;
    case MessageType::kCheckpoint:
      m.step = 100;
      m.text = "train_dir/\xc3\xbc";
      break;
    case MessageType::kShutdown:
      break;
    case MessageType::kRestore:
      m.step = 200;
      break;
    case MessageType::kShardMap:
      m.chains = {{0, {0, 1, 2}, {3}}, {1, {1}, {}}, {-1, {}, {0, 1}}};
      m.map_proofs = {{"worker-1", std::string(32, 'a')}, {"chief", std::string("\0tag", 4)}};
      break;
    case MessageType::kDataLease:
      m.value = 2;
      break;
    case MessageType::kRowPull:
      m.text = "wide_C1";
      m.ids = {0, int64_t{1} << 62, 7, 7};
      break;
    case MessageType::kRowPush:
      m.text = "deep_C2";
      m.step = 31;
      m.sequence = 4;
      m.ids = {5, 0, int64_t{1} << 40};
      m.tensors = {{"deep_C2", RandomBitsTensor({3, 8}, 5)}};
      break;
    case MessageType::kStoreSet:
      m.names = {"key"};
      m.text = std::string("va\0lue", 6);
      break;
    case MessageType::kStoreGet:
      m.names = {"key"};
      break;
    case MessageType::kCollective:
      m.text = "broadcast";
      m.value = 4;
      m.step = 7;
      m.root = 1;
      m.tensors = {tensors[0]};
      break;
    case MessageType::kReplicate:
      m.role = "ps";
      m.sequence = 11;
      m.step = 10;
      m.value = 12;
      m.tensors = tensors;
      m.assigns = {"scalar", "empty"};
      m.pushes = {{"worker", 1, 77, 9, -3, -1, "stale: computed from step 1"},
                  {"chief", 0, uint64_t{1} << 60, 1, int64_t{1} << 50, 0, std::string("a\0b", 3)},
                  {"", -1, 0, 0, 0, 0, ""}};
      m.uses = {{0, 4, 128}};
      m.link = std::string("\0link\xff", 6) + std::string(26, 'x');
      break;
    case MessageType::kReplicaCopy:
      m.role = "ps";
      m.sequence = 40;
      m.value = 39;
      m.tensors = tensors;
      m.pushes = {{"chief", 0, 7, 12, 40, 0, ""}};
      m.uses = {{1, 0, 1024}};
      m.text = "fingerprint";
      m.link = std::string(32, 'k');
      break;
    case MessageType::kOk:
    case MessageType::kError:
      m.role = "ps";
      m.step = 12;
      m.value = 1;
      m.text = "no variable 'w'";
      m.tensors = tensors;
      m.sequence = 13;
      m.steps = {100, -1, int64_t{1} << 50};
      m.uses = {{0, 3, 5}};
      m.chains = {{0, {0, 1}, {}}};
      m.map_proofs = {{"worker-0", std::string(32, 'b')}};
      m.caught_up = {{1, {0}, {}}};
      if (type == MessageType::kError) m.error_code = StatusCode::kNotFound;
      break;
  }
  return m;
}

// Every type, requests and replies.
inline std::vector<MessageType> AllMessageTypes() {
  std::vector<MessageType> types;
  for (int t = 0; t <= static_cast<int>(MessageType::kRowPush); ++t) {
    types.push_back(static_cast<MessageType>(t));
  }
  return types;
}

// Every field of the two messages equal, tensors bitwise.
inline void ExpectSameMessage(const Message& a, const Message& b) {
  const std::string type = MessageTypeName(a.type);
  EXPECT_EQ(a.type, b.type) << type;
  EXPECT_EQ(a.request_id, b.request_id) << type;
  EXPECT_EQ(a.role, b.role) << type;
  EXPECT_EQ(a.task_index, b.task_index) << type;
  EXPECT_EQ(a.incarnation, b.incarnation) << type;
  EXPECT_EQ(a.shard, b.shard) << type;
  EXPECT_EQ(a.map_epoch, b.map_epoch) << type;
  EXPECT_EQ(a.step, b.step) << type;
  EXPECT_EQ(a.value, b.value) << type;
  EXPECT_EQ(a.text, b.text) << type;
  EXPECT_EQ(a.names, b.names) << type;
  EXPECT_EQ(a.ids, b.ids) << type;
  EXPECT_EQ(a.sequence, b.sequence) << type;
  EXPECT_EQ(a.assigns, b.assigns) << type;
  EXPECT_EQ(a.root, b.root) << type;
  EXPECT_EQ(a.steps, b.steps) << type;
  EXPECT_EQ(a.error_code, b.error_code) << type;
  EXPECT_EQ(a.pushes, b.pushes) << type;
  EXPECT_EQ(a.chains, b.chains) << type;
  EXPECT_EQ(a.uses, b.uses) << type;
  for (const auto* tags : {&a.map_proofs, &a.record_tags}) {
    const auto& other = tags == &a.map_proofs ? b.map_proofs : b.record_tags;
    ASSERT_EQ(tags->size(), other.size()) << type;
    for (size_t i = 0; i < tags->size(); ++i) {
      EXPECT_EQ((*tags)[i].name, other[i].name) << type;
      EXPECT_EQ((*tags)[i].tag, other[i].tag) << type;
    }
  }
  EXPECT_EQ(a.made_epoch, b.made_epoch) << type;
  EXPECT_EQ(a.caught_up, b.caught_up) << type;
  EXPECT_EQ(a.link, b.link) << type;
  EXPECT_EQ(a.state_digest, b.state_digest) << type;
  EXPECT_EQ(a.pull_dtype, b.pull_dtype) << type;
  ASSERT_EQ(a.tensors.size(), b.tensors.size()) << type;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].name, b.tensors[i].name) << type;
    EXPECT_EQ(a.tensors[i].dtype, b.tensors[i].dtype) << type << " " << i;
    EXPECT_TRUE(BitwiseEqual(a.tensors[i].tensor, b.tensors[i].tensor)) << type << " " << i;
  }
}

// Sets the discriminant of `Union` (a struct's unnamed union, or a group) in `builder`'s data
// section to `which`, known or not: the typed builders only set known ones.
template <typename Union, typename StructBuilder>
void SetWhich(StructBuilder builder, uint16_t which) {
  const uint32_t offset =
      capnp::Schema::from<Union>().getProto().getStruct().getDiscriminantOffset();
  kj::ArrayPtr<capnp::byte> data = capnp::AnyStruct::Builder(kj::mv(builder)).getDataSection();
  ASSERT_LE((offset + 1) * sizeof(uint16_t), data.size());
  std::memcpy(data.begin() + offset * sizeof(uint16_t), &which, sizeof(which));  // little endian
}

// A header with this build's version and whatever `fill` sets.
inline std::string RawHeader(const std::function<void(schema::Header::Builder)>& fill) {
  capnp::MallocMessageBuilder builder;
  auto header = builder.initRoot<schema::Header>();
  header.setVersion(kProtocolVersion);
  fill(header);
  kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
  return std::string(reinterpret_cast<const char*>(words.begin()), words.size() * 8);
}

// One tensor's metadata in a raw header.
inline void SetMeta(schema::TensorMeta::Builder meta, const std::string& name,
                    const std::vector<int64_t>& dims, uint64_t byte_length) {
  meta.setName(name);
  auto shape = meta.initShape(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) shape.set(i, dims[i]);
  meta.setByteLength(byte_length);
}

class RawDealer {
 public:
  explicit RawDealer(const std::string& endpoint) {
    context_ = zmq_ctx_new();
    socket_ = zmq_socket(context_, ZMQ_DEALER);
    const int linger = 0;
    zmq_setsockopt(socket_, ZMQ_LINGER, &linger, sizeof(linger));
    EXPECT_EQ(zmq_connect(socket_, endpoint.c_str()), 0) << zmq_strerror(zmq_errno());
  }
  ~RawDealer() {
    zmq_close(socket_);
    zmq_ctx_term(context_);
  }
  void Send(const std::vector<std::string>& frames) {
    for (size_t i = 0; i < frames.size(); ++i) {
      const int flags = i + 1 < frames.size() ? ZMQ_SNDMORE : 0;
      ASSERT_GE(zmq_send(socket_, frames[i].data(), frames[i].size(), flags), 0)
          << zmq_strerror(zmq_errno());
    }
  }

 private:
  void* context_ = nullptr;
  void* socket_ = nullptr;
};

}  // namespace wire
}  // namespace pstrain
