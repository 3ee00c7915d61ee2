// Fuzzes wire::Decode, what a server runs on every message a peer sends. Input: one byte of
// flags (which limits are small, whether frames sit at odd addresses), then frames, each a
// 16-bit length and its bytes; the first frame is the Cap'n Proto header (each protocol's structs,
// common/wire/pstrain.capnp). Whatever decodes must encode again (a decoded message carries only
// its type's fields) and decode to the same message.
#include <glog/logging.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/wire/codec.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_setup.h"

namespace pstrain {
namespace wire {
namespace {

// Small limits, so that every limit check can be reached by a small input.
MessageLimits LimitsFrom(uint8_t flags) {
  MessageLimits limits;
  if (flags & 1) limits.max_header_bytes = 256;
  if (flags & 2) limits.max_frames = 3;
  if (flags & 4) limits.max_tensor_bytes = 64;
  if (flags & 8) limits.max_total_bytes = 1024;
  return limits;
}

// A frame with its own copy of `bytes`, at an odd address when `misalign` (ZeroMQ puts small
// frames at any offset of its read buffer).
Frame OwnedFrame(const std::string& bytes, bool misalign) {
  auto buffer = std::make_shared<std::vector<char>>(bytes.size() + 1);
  char* data = buffer->data() + (misalign ? 1 : 0);
  std::memcpy(data, bytes.data(), bytes.size());
  return {data, bytes.size(), buffer};
}

// Bitwise, so that NaN payloads must survive too.
bool SameTensor(const NamedTensor& a, const NamedTensor& b) {
  return a.name == b.name && a.dtype == b.dtype && a.tensor.shape() == b.tensor.shape() &&
         a.tensor.bytes() == b.tensor.bytes() &&
         std::memcmp(a.tensor.data(), b.tensor.data(), a.tensor.bytes()) == 0;
}

void CheckSameMessage(const Message& a, const Message& b) {
  CHECK(a.type == b.type);
  CHECK_EQ(a.request_id, b.request_id);
  CHECK_EQ(a.role, b.role);
  CHECK_EQ(a.task_index, b.task_index);
  CHECK_EQ(a.step, b.step);
  CHECK_EQ(a.value, b.value);
  CHECK_EQ(a.text, b.text);
  CHECK(a.names == b.names);
  CHECK(a.assigns == b.assigns);
  CHECK_EQ(a.root, b.root);
  CHECK(a.steps == b.steps);
  CHECK_EQ(a.sequence, b.sequence);
  CHECK_EQ(a.incarnation, b.incarnation);
  CHECK(a.error_code == b.error_code);
  CHECK_EQ(a.shard, b.shard);
  CHECK_EQ(a.map_epoch, b.map_epoch);
  CHECK(a.pushes == b.pushes);
  CHECK(a.chains == b.chains);
  CHECK(a.uses == b.uses);
  CHECK(a.caught_up == b.caught_up);
  CHECK_EQ(a.map_proofs.size(), b.map_proofs.size());
  CHECK(a.link == b.link);
  CHECK(a.pull_dtype == b.pull_dtype);
  CHECK_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    CHECK(SameTensor(a.tensors[i], b.tensors[i])) << "tensor " << i << " changed in a round trip";
  }
}

}  // namespace
}  // namespace wire
}  // namespace pstrain

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  pstrain::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain::wire;
  pstrain::fuzz::FuzzInput in(data, size);
  const uint8_t flags = in.Byte();
  const MessageLimits limits = LimitsFrom(flags);
  std::vector<Frame> frames;
  while (!in.empty()) frames.push_back(OwnedFrame(in.LengthPrefixed(), flags & 16));

  pstrain::Result<Message> decoded = Decode(frames, limits, "fuzz");
  if (!decoded.ok()) {
    CHECK(!decoded.status().message().empty()) << "a refused message must say why";
    return 0;
  }
  const bool reply = decoded->type == MessageType::kOk || decoded->type == MessageType::kError;
  CHECK_EQ(Decode(frames, limits, "fuzz", Expect::kRequest).ok(), !reply)
      << "a server's socket takes every request and no reply";
  // A decoded message satisfies everything Encode requires, and encoding is a fixed point: the
  // header bytes also cover fields added to the schema after this target was written.
  pstrain::Result<EncodedMessage> once = Encode(*decoded);
  CHECK(once.ok()) << "a decoded message does not encode: " << once.status().ToString();
  pstrain::Result<Message> again = Decode(FramesOf(*once));
  CHECK(again.ok()) << "a re-encoded message does not decode: " << again.status().ToString();
  CheckSameMessage(*decoded, *again);
  pstrain::Result<EncodedMessage> twice = Encode(*again);
  CHECK(twice.ok());
  CHECK(once->header == twice->header) << "encoding is not stable across a round trip";
  return 0;
}
