#include "common/wire/codec.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>
#include <kj/io.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "common/bfloat16.h"
#include "common/wire/codec_body.h"
#include "common/wire/pstrain.capnp.h"

namespace pstrain {
namespace wire {
namespace codec {
namespace {

// A peer's role is echoed into error messages; a hostile one must not flood the log.
constexpr size_t kMaxEchoedRoleChars = 32;

// "worker 1", "ps", or "an unnamed peer": who sent a message, for error messages.
std::string SenderName(const std::string& role, int32_t task_index) {
  if (role.empty()) return "an unnamed peer";
  std::string name = role.substr(0, kMaxEchoedRoleChars);
  if (task_index >= 0) name += " " + std::to_string(task_index);
  return name;
}

std::string ShapeString(const std::vector<int64_t>& dims) { return Shape(dims).ToString(); }

// Number of float32 elements in `dims`, or an error if a dim is negative or the tensor would be
// larger than `max_tensor_bytes` (checked before multiplying, so it cannot overflow).
Result<int64_t> CheckedElements(const std::string& tensor, const std::vector<int64_t>& dims,
                                const MessageLimits& limits) {
  const uint64_t max_elements = limits.max_tensor_bytes / sizeof(float);
  uint64_t n = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) {
      return InvalidArgument(
          StrCat("tensor '", tensor, "' dim ", i, " is ", dims[i], "; dims must be >= 0"));
    }
    const uint64_t d = static_cast<uint64_t>(dims[i]);
    if (n != 0 && d > max_elements / n) {
      return InvalidArgument(StrCat("tensor '", tensor, "' shape ", ShapeString(dims),
                                    " is larger than max_tensor_bytes=", limits.max_tensor_bytes));
    }
    n *= d;
  }
  return static_cast<int64_t>(n);
}

// The tensor for one frame: the frame's memory itself when large and float-aligned (the tensor
// keeps the frame alive), otherwise an aligned copy.
Tensor TensorFromFrame(std::vector<int64_t> dims, const Frame& frame) {
  const bool aligned = reinterpret_cast<uintptr_t>(frame.data) % alignof(float) == 0;
  if (frame.size >= kWrapMinBytes && aligned) {
    float* data = static_cast<float*>(const_cast<void*>(frame.data));
    return Tensor::Wrap(Shape(std::move(dims)), data,
                        [owner = frame.owner]() mutable { owner.reset(); });
  }
  Tensor copy = Tensor::Uninitialized(Shape(std::move(dims)));
  if (frame.size > 0) std::memcpy(copy.data(), frame.data, frame.size);
  return copy;
}

// A bfloat16 frame widened into a float32 tensor of its own (frames sit at any offset, so the
// 16-bit elements are read unaligned).
Tensor TensorFromBfloat16Frame(std::vector<int64_t> dims, const Frame& frame) {
  Tensor t = Tensor::Uninitialized(Shape(std::move(dims)));
  const auto* in = static_cast<const unsigned char*>(frame.data);
  for (int64_t i = 0; i < t.size(); ++i) {
    uint16_t b;
    std::memcpy(&b, in + i * sizeof(b), sizeof(b));
    t[i] = Bfloat16ToFloat(b);
  }
  return t;
}

// `t`'s frame: a float32 tensor's own buffer, a bfloat16 one's rounded copy.
Frame FrameOf(const NamedTensor& t) {
  if (t.dtype == TensorDType::kBfloat16) {
    auto rounded = std::make_shared<std::vector<uint16_t>>(t.tensor.size());
    FloatsToBfloat16(t.tensor.data(), t.tensor.size(), rounded->data());
    return {rounded->data(), WireBytes(t), rounded};
  }
  auto keep = std::make_shared<const Tensor>(t.tensor);
  return {keep->data(), keep->bytes(), keep};
}

// One tensor frame after the header per tensor its struct lists (none for a type without).
Status CheckTensorFrames(size_t listed, const Received& r) {
  const size_t before = 1 + r.leading_frames;
  if (r.frames.size() == listed + before) return Status::OK();
  return DataLoss(StrCat("the header of a ", MessageTypeName(r.m->type), " from ", r.sender,
                         " lists ", listed, " tensors but ",
                         r.frames.size() < before ? 0 : r.frames.size() - before,
                         " tensor frames came with it (expected one frame per tensor)"));
}

bool IsReply(schema::Header::Body::Which which) {
  return which == schema::Header::Body::OK || which == schema::Header::Body::ERROR;
}

Status ReadBody(schema::Header::Body::Reader body, Received& r, Expect expect) {
  if (expect == Expect::kRequest && IsReply(body.which())) {
    const char* type = body.which() == schema::Header::Body::OK ? "ok" : "error";
    return InvalidArgument(StrCat(type, " is a reply, not a request (from ", r.sender, ")"));
  }
  switch (body.which()) {
    case schema::Header::Body::WORKER:
      return ReadWorkerRequest(body.getWorker(), r);
    case schema::Header::Body::HOST:
      return ReadHostRequest(body.getHost(), r);
    case schema::Header::Body::REPLICATION:
      return ReadReplicationRequest(body.getReplication(), r);
    case schema::Header::Body::OK:
      return ReadReply(body.getOk(), MessageType::kOk, r);
    case schema::Header::Body::ERROR:
      return ReadReply(body.getError(), MessageType::kError, r);
  }
  return UnknownType("protocol", body.which(), r, "worker", schema::Header::Body::ERROR, "error");
}

Result<Message> DecodeHeader(schema::Header::Reader header, const std::vector<Frame>& frames,
                             const MessageLimits& limits, const std::string& receiver,
                             Expect expect) {
  Message m;
  m.role = TextOf(header.getRole());
  m.task_index = header.getTaskIndex();
  Received r{frames, limits, SenderName(m.role, m.task_index), &m};
  if (header.getVersion() != kProtocolVersion) {
    return InvalidArgument(StrCat("protocol version ", header.getVersion(), " from ", r.sender,
                                  ", ", receiver, " speaks ", kProtocolVersion));
  }
  m.request_id = header.getRequestId();
  m.incarnation = header.getIncarnation();
  m.shard = header.getShard();
  m.map_epoch = header.getMapEpoch();
  RETURN_IF_ERROR(ReadBody(header.getBody(), r, expect));
  RETURN_IF_ERROR(CheckTensorFrames(m.tensors.size(), r));
  return m;
}

Status WriteBody(Written& w, schema::Header::Body::Builder body, std::vector<Frame>* frames) {
  switch (w.type()) {
    case MessageType::kStoreSet:
    case MessageType::kStoreGet:
    case MessageType::kCollective:
      return WriteHostRequest(w, body.initHost(), frames);
    case MessageType::kReplicate:
    case MessageType::kReplicaCopy:
      return WriteReplicationRequest(w, body.initReplication(), frames);
    case MessageType::kOk:
      return WriteReply(w, body.initOk(), frames);
    case MessageType::kError:
      return WriteReply(w, body.initError(), frames);
    default:
      return WriteWorkerRequest(w, body.initWorker(), frames);
  }
}

}  // namespace

Result<TensorDType> DTypeOf(schema::DType dtype, const std::string& what) {
  switch (dtype) {
    case schema::DType::FLOAT32:
      return TensorDType::kFloat32;
    case schema::DType::BFLOAT16:
      return TensorDType::kBfloat16;
  }
  return InvalidArgument(StrCat(what, " has dtype ", static_cast<uint16_t>(dtype),
                                "; known dtypes are float32 (0) and bfloat16 (1)"));
}

schema::DType SchemaDType(TensorDType dtype) {
  return dtype == TensorDType::kBfloat16 ? schema::DType::BFLOAT16 : schema::DType::FLOAT32;
}

Status WriteTensors(const std::vector<NamedTensor>& tensors, MessageType type,
                    capnp::List<schema::TensorMeta>::Builder metas, std::vector<Frame>* frames) {
  frames->reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const NamedTensor& t = tensors[i];
    if (!ValidName(t.name)) {
      return InvalidArgument(StrCat("tensor ", i, " of the ", MessageTypeName(type),
                                    " has an empty name or one holding a NUL byte"));
    }
    if (t.tensor.empty()) {
      return InvalidArgument(StrCat("tensor '", t.name, "' of the ", MessageTypeName(type),
                                    " has no buffer (a default-constructed Tensor)"));
    }
    auto meta = metas[i];
    meta.setName(AsText(t.name));
    const auto& dims = t.tensor.shape().dims();
    auto shape = meta.initShape(dims.size());
    for (size_t d = 0; d < dims.size(); ++d) shape.set(d, dims[d]);
    meta.setDtype(SchemaDType(t.dtype));
    meta.setByteLength(WireBytes(t));
    frames->push_back(FrameOf(t));
  }
  return Status::OK();
}

Status ReadTensors(capnp::List<schema::TensorMeta>::Reader metas, const Received& r) {
  RETURN_IF_ERROR(CheckTensorFrames(metas.size(), r));
  Message& m = *r.m;
  m.tensors.reserve(metas.size());
  for (uint32_t i = 0; i < metas.size(); ++i) {
    const auto meta = metas[i];
    std::string name = TextOf(meta.getName());
    if (!ValidName(name)) {
      return InvalidArgument(StrCat("tensor ", i, " of ", metas.size(), " in the ",
                                    MessageTypeName(m.type), " from ", r.sender,
                                    " has an empty name or one holding a NUL byte"));
    }
    ASSIGN_OR_RETURN(const TensorDType dtype,
                     DTypeOf(meta.getDtype(), StrCat("tensor '", name, "' from ", r.sender)));
    const char* dtype_name = dtype == TensorDType::kBfloat16 ? "bfloat16" : "float32";
    const auto shape = meta.getShape();
    std::vector<int64_t> dims;
    dims.reserve(shape.size());
    for (int64_t d : shape) dims.push_back(d);
    ASSIGN_OR_RETURN(const int64_t elements, CheckedElements(name, dims, r.limits));
    const uint64_t bytes = static_cast<uint64_t>(elements) *
                           (dtype == TensorDType::kBfloat16 ? sizeof(uint16_t) : sizeof(float));
    if (meta.getByteLength() != bytes) {
      return DataLoss(StrCat("tensor '", name, "' declares ", meta.getByteLength(),
                             " bytes but its shape ", ShapeString(dims), " of ", dtype_name,
                             " needs ", bytes));
    }
    const Frame& frame = r.frames[i + 1 + r.leading_frames];
    if (frame.size != bytes) {
      return DataLoss(StrCat("tensor '", name, "' frame is ", frame.size, " bytes but its shape ",
                             ShapeString(dims), " of ", dtype_name, " needs ", bytes));
    }
    Tensor tensor = dtype == TensorDType::kBfloat16
                        ? TensorFromBfloat16Frame(std::move(dims), frame)
                        : TensorFromFrame(std::move(dims), frame);
    m.tensors.push_back({std::move(name), std::move(tensor), dtype});
  }
  return Status::OK();
}

}  // namespace codec

using codec::StrCat;

Status CheckFrameCount(size_t frames, const MessageLimits& limits) {
  if (frames > limits.max_frames) {
    return InvalidArgument(
        StrCat("message has ", frames, " frames, above the limit max_frames=", limits.max_frames));
  }
  return Status::OK();
}

Status CheckTotalBytes(size_t total_bytes, const MessageLimits& limits) {
  if (total_bytes > limits.max_total_bytes) {
    return InvalidArgument(
        StrCat("message has ", total_bytes,
               " bytes, above the limit max_total_bytes=", limits.max_total_bytes));
  }
  return Status::OK();
}

Result<EncodedMessage> Encode(const Message& message) {
  capnp::MallocMessageBuilder builder;
  auto header = builder.initRoot<schema::Header>();
  header.setVersion(kProtocolVersion);
  header.setRequestId(message.request_id);
  header.setRole(codec::AsText(message.role));
  header.setTaskIndex(message.task_index);
  header.setIncarnation(message.incarnation);
  header.setShard(message.shard);
  header.setMapEpoch(message.map_epoch);
  EncodedMessage encoded;
  codec::Written fields(message);
  RETURN_IF_ERROR(codec::WriteBody(fields, header.getBody(), &encoded.tensor_frames));
  RETURN_IF_ERROR(fields.Unwritten());
  RETURN_IF_ERROR(codec::CheckAssigns(message));
  // Written straight into the string that becomes the header frame.
  encoded.header.resize(capnp::computeSerializedSizeInWords(builder) * sizeof(capnp::word));
  kj::ArrayOutputStream out(
      kj::arrayPtr(reinterpret_cast<kj::byte*>(&encoded.header[0]), encoded.header.size()));
  capnp::writeMessage(out, builder);
  return encoded;
}

std::vector<Frame> FramesOf(const EncodedMessage& encoded) {
  auto header = std::make_shared<const std::string>(encoded.header);
  std::vector<Frame> frames;
  frames.push_back({header->data(), header->size(), header});
  for (const Frame& f : encoded.tensor_frames) {
    // An owner of their own, so that these frames are released apart from `encoded`'s.
    frames.push_back(
        {f.data, f.size, std::make_shared<const std::shared_ptr<const void>>(f.owner)});
  }
  return frames;
}

Result<Message> Decode(const std::vector<Frame>& frames, const MessageLimits& limits,
                       const std::string& receiver, Expect expect) {
  if (frames.empty()) return DataLoss("message has no frames; expected a header frame");
  RETURN_IF_ERROR(CheckFrameCount(frames.size(), limits));
  size_t total_bytes = 0;
  for (const Frame& f : frames) total_bytes += f.size;
  RETURN_IF_ERROR(CheckTotalBytes(total_bytes, limits));

  const Frame& head = frames[0];
  if (head.size > limits.max_header_bytes) {
    return InvalidArgument(
        StrCat("header frame is ", head.size,
               " bytes, above the limit max_header_bytes=", limits.max_header_bytes));
  }
  if (head.size == 0 || head.size % sizeof(capnp::word) != 0) {
    return DataLoss(StrCat("header frame is ", head.size,
                           " bytes; a Cap'n Proto message is a non-zero multiple of 8 bytes"));
  }
  // Cap'n Proto reads words in place and needs them 8-byte aligned; ZeroMQ puts small frames at
  // any offset of its read buffer, so an unaligned header (small, cheap) is copied first.
  const size_t words = head.size / sizeof(capnp::word);
  kj::Array<capnp::word> aligned_copy;
  kj::ArrayPtr<const capnp::word> in_place;
  if (reinterpret_cast<uintptr_t>(head.data) % alignof(capnp::word) == 0) {
    in_place = kj::arrayPtr(static_cast<const capnp::word*>(head.data), words);
  } else {
    aligned_copy = kj::heapArray<capnp::word>(words);
    std::memcpy(aligned_copy.begin(), head.data, head.size);
    in_place = kj::arrayPtr(aligned_copy.begin(), words);
  }
  capnp::ReaderOptions options;
  // Each word of a well-formed header is visited about once; the slack bounds what a header
  // with aliased pointers can make us read.
  options.traversalLimitInWords = 2 * limits.max_header_bytes / sizeof(capnp::word) + 64;
  try {
    capnp::FlatArrayMessageReader reader(in_place, options);
    if (reader.getEnd() != in_place.end()) {
      return DataLoss(StrCat("header frame has ",
                             (in_place.end() - reader.getEnd()) * sizeof(capnp::word),
                             " bytes after its Cap'n Proto message"));
    }
    return codec::DecodeHeader(reader.getRoot<schema::Header>(), frames, limits, receiver, expect);
  } catch (const kj::Exception& e) {
    return DataLoss(
        StrCat("header frame is not a valid Cap'n Proto message: ", e.getDescription().cStr()));
  }
}

uint64_t PeekRequestId(const Frame& header, const MessageLimits& limits) {
  if (header.size == 0 || header.size > limits.max_header_bytes ||
      header.size % sizeof(capnp::word) != 0) {
    return 0;
  }
  auto words = kj::heapArray<capnp::word>(header.size / sizeof(capnp::word));
  std::memcpy(words.begin(), header.data, header.size);
  capnp::ReaderOptions options;
  options.traversalLimitInWords = 2 * limits.max_header_bytes / sizeof(capnp::word) + 64;
  try {
    capnp::FlatArrayMessageReader reader(words, options);
    return reader.getRoot<schema::Header>().getRequestId();
  } catch (const kj::Exception&) {
    return 0;
  }
}

}  // namespace wire
}  // namespace pstrain
