// Message <-> frames: one Cap'n Proto header frame (common/wire/pstrain.capnp) and one frame of
// raw float32 (or bfloat16) bytes per tensor. Decode validates everything a peer could get wrong
// and answers with an error naming it; the bytes come from the network, so nothing here CHECKs on
// them. A bfloat16 frame decodes into a float32 Tensor (widened, exactly).
// The flat Message is written into its protocol's struct for its type (codec_worker.cc,
// codec_host.cc, codec_replication.cc, codec_reply.cc), which is what decides the fields a type
// may carry: there is no other table of them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "common/wire/message.h"

namespace pstrain {
namespace wire {

// One frame: its bytes and whatever keeps them alive (the ZeroMQ message, a tensor's buffer).
// Decoded tensors point into `data` and hold `owner` until they are destroyed.
struct Frame {
  const void* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> owner;
};

// What Encode produces: the header bytes and one frame per tensor: a float32 tensor's own buffer
// (shared, not copied), a bfloat16 one's rounded copy.
struct EncodedMessage {
  std::string header;
  std::vector<Frame> tensor_frames;
};

// Fails (InvalidArgument) on what the receiver would refuse anyway: a field its type's struct
// lacks ("a pull carries no 'sequence'"), a variable or tensor name that is empty or holds a NUL
// byte, a tensor with no buffer, an assign naming no pushed tensor.
Result<EncodedMessage> Encode(const Message& message);

// Frames pointing into `encoded` (they share its buffers): for decoding without a socket.
std::vector<Frame> FramesOf(const EncodedMessage& encoded);

// What a receiver takes: a server's socket only requests (a reply there is refused by name).
enum class Expect { kAny, kRequest };

// Parses frames[0] as the header and frames[1..] as its tensors, checking the limits first.
// `receiver` names this side in a version-mismatch error ("this server speaks 1").
// Tensor frames of at least kWrapMinBytes whose data is float-aligned are wrapped, not copied.
Result<Message> Decode(const std::vector<Frame>& frames, const MessageLimits& limits = {},
                       const std::string& receiver = "this process", Expect expect = Expect::kAny);

// The request id in a header frame, or 0 if it cannot be read: so that a message refused whole
// (above a limit, its tensor frames dropped unread) still gets its error reply matched.
uint64_t PeekRequestId(const Frame& header, const MessageLimits& limits = {});

// Smaller tensor frames are copied on decode: they sit inside ZeroMQ's shared read buffer, which
// a wrapping tensor would pin for as long as it lives, and copying them costs as little as
// wrapping.
constexpr size_t kWrapMinBytes = 8192;

// The limits checked before a frame is parsed; shared with the transport, which checks them
// while frames arrive.
Status CheckFrameCount(size_t frames, const MessageLimits& limits);
Status CheckTotalBytes(size_t total_bytes, const MessageLimits& limits);

}  // namespace wire
}  // namespace pstrain
