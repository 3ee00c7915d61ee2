#include "common/wire/codec.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>
#include <kj/io.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <utility>

#include "common/bfloat16.h"
#include "common/wire/pstrain.capnp.h"

namespace pstrain {
namespace wire {
namespace {

constexpr MessageType kLastType = MessageType::kDataLease;
constexpr uint16_t kLastMessageType = static_cast<uint16_t>(kLastType);
constexpr uint16_t kLastStatusCode = static_cast<uint16_t>(StatusCode::kAborted);
// A peer's role is echoed into error messages; a hostile one must not flood the log.
constexpr size_t kMaxEchoedRoleChars = 32;

template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream s;
  (s << ... << args);
  return s.str();
}

// "worker 1", "ps", or "an unnamed peer": who sent a message, for error messages.
std::string SenderName(const std::string& role, int32_t task_index) {
  if (role.empty()) return "an unnamed peer";
  std::string name = role.substr(0, kMaxEchoedRoleChars);
  if (task_index >= 0) name += " " + std::to_string(task_index);
  return name;
}

std::string ShapeString(const std::vector<int64_t>& dims) { return Shape(dims).ToString(); }

// All the bytes of a Text field, both ways: cStr() and the implicit conversion from std::string
// (through c_str()) stop at an embedded NUL, silently turning "a\0b" into "a".
std::string TextOf(capnp::Text::Reader text) { return std::string(text.begin(), text.size()); }
capnp::Text::Reader AsText(const std::string& s) { return capnp::Text::Reader(s.data(), s.size()); }

// Variable and tensor names end up in logs and checkpoint indexes, where a NUL byte cuts them.
bool ValidName(const std::string& name) {
  return !name.empty() && name.find('\0') == std::string::npos;
}

// A list of variable names (`what`: "name", "assign"), each checked with ValidName.
Result<std::vector<std::string>> NamesOf(capnp::List<capnp::Text>::Reader list,
                                         const std::string& what, MessageType type,
                                         const std::string& sender) {
  std::vector<std::string> names;
  names.reserve(list.size());
  for (uint32_t i = 0; i < list.size(); ++i) {
    std::string name = TextOf(list[i]);
    if (!ValidName(name)) {
      return InvalidArgument(StrCat(what, " ", i, " of ", list.size(), " in the ",
                                    MessageTypeName(type), " from ", sender,
                                    " is empty or holds a NUL byte; variable names must be "
                                    "non-empty, without NUL"));
    }
    names.push_back(std::move(name));
  }
  return names;
}

Status SetNames(const std::vector<std::string>& names, const std::string& what, MessageType type,
                capnp::List<capnp::Text>::Builder list) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (!ValidName(names[i])) {
      return InvalidArgument(StrCat(what, " ", i, " of the ", MessageTypeName(type),
                                    " is empty or holds a NUL byte; variable names must be "
                                    "non-empty, without NUL"));
    }
    list.set(i, AsText(names[i]));
  }
  return Status::OK();
}

// Retry-cache entries; a role is echoed into logs, where a NUL byte cuts it.
// A list of structs whose elements the writer shrank to nothing (Cap'n Proto allows it, and the
// reader then sees defaults) decodes into more entries than the header could hold as Encode writes
// them: a few kilobytes would become megabytes. Each entry must have had room for a whole one.
template <typename T>
Status CheckEntryCount(typename capnp::List<T>::Reader list, size_t header_bytes, const char* what,
                       MessageType type, const std::string& sender) {
  constexpr size_t kEntryBytes =
      sizeof(capnp::word) * (T::_capnpPrivate::dataWordSize + T::_capnpPrivate::pointerCount);
  if (size_t{list.size()} * kEntryBytes <= header_bytes) return Status::OK();
  return InvalidArgument(StrCat("the ", MessageTypeName(type), " from ", sender, " lists ",
                                list.size(), " ", what, " in a ", header_bytes,
                                "-byte header, which holds at most ", header_bytes / kEntryBytes,
                                " (", kEntryBytes, " bytes each)"));
}

Result<std::vector<PushEntry>> PushesOf(capnp::List<schema::PushEntry>::Reader list,
                                        MessageType type, const std::string& sender) {
  std::vector<PushEntry> pushes;
  pushes.reserve(list.size());
  for (uint32_t i = 0; i < list.size(); ++i) {
    const auto p = list[i];
    PushEntry e;
    e.role = TextOf(p.getRole());
    if (e.role.find('\0') != std::string::npos) {
      return InvalidArgument(StrCat("push entry ", i, " of ", list.size(), " in the ",
                                    MessageTypeName(type), " from ", sender,
                                    " names a role holding a NUL byte"));
    }
    e.task_index = p.getTaskIndex();
    e.incarnation = p.getIncarnation();
    e.sequence = p.getSequence();
    e.reply_step = p.getReplyStep();
    e.reply_value = p.getReplyValue();
    e.reply_text = TextOf(p.getReplyText());
    pushes.push_back(std::move(e));
  }
  return pushes;
}

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

// The schema's dtype, or an error naming the value and the known ones.
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

Result<Message> DecodeHeader(schema::Header::Reader header, const std::vector<Frame>& frames,
                             const MessageLimits& limits, const std::string& receiver) {
  Message m;
  m.role = TextOf(header.getRole());
  m.task_index = header.getTaskIndex();
  const std::string sender = SenderName(m.role, m.task_index);
  if (header.getVersion() != kProtocolVersion) {
    return InvalidArgument(StrCat("protocol version ", header.getVersion(), " from ", sender, ", ",
                                  receiver, " speaks ", kProtocolVersion));
  }
  const uint16_t type = static_cast<uint16_t>(header.getType());
  if (type > kLastMessageType) {
    return InvalidArgument(StrCat("unknown message type ", type, " from ", sender,
                                  "; known types are 0 (register) to ", kLastMessageType, " (",
                                  MessageTypeName(kLastType), ")"));
  }
  m.type = static_cast<MessageType>(type);
  const uint16_t code = header.getErrorCode();
  if (code > kLastStatusCode) {
    return InvalidArgument(StrCat("unknown error code ", code, " in a ", MessageTypeName(m.type),
                                  " from ", sender, "; known codes are 0 to ", kLastStatusCode));
  }
  m.error_code = static_cast<StatusCode>(code);
  m.request_id = header.getRequestId();
  m.step = header.getStep();
  m.value = header.getValue();
  m.incarnation = header.getIncarnation();
  m.sequence = header.getSequence();
  m.text = TextOf(header.getText());

  ASSIGN_OR_RETURN(m.names, NamesOf(header.getNames(), "name", m.type, sender));
  ASSIGN_OR_RETURN(m.pull_dtype, DTypeOf(header.getPullDtype(),
                                         StrCat("the pullDtype of the ", MessageTypeName(m.type),
                                                " from ", sender)));
  ASSIGN_OR_RETURN(m.assigns, NamesOf(header.getAssigns(), "assign", m.type, sender));
  m.root = header.getRoot();
  const auto steps = header.getSteps();
  m.steps.reserve(steps.size());
  for (int64_t step : steps) m.steps.push_back(step);
  m.shard = header.getShard();
  m.map_epoch = header.getMapEpoch();
  const size_t header_bytes = frames.empty() ? 0 : frames[0].size;
  RETURN_IF_ERROR(CheckEntryCount<schema::PushEntry>(header.getPushes(), header_bytes,
                                                     "push entries", m.type, sender));
  RETURN_IF_ERROR(
      CheckEntryCount<schema::Chain>(header.getChains(), header_bytes, "chains", m.type, sender));
  RETURN_IF_ERROR(CheckEntryCount<schema::ChunkUse>(header.getUses(), header_bytes, "chunk uses",
                                                    m.type, sender));
  ASSIGN_OR_RETURN(m.pushes, PushesOf(header.getPushes(), m.type, sender));
  for (const auto chain : header.getChains()) {
    Chain c;
    c.shard = chain.getShard();
    for (int32_t t : chain.getTasks()) c.tasks.push_back(t);
    for (int32_t t : chain.getJoining()) c.joining.push_back(t);
    m.chains.push_back(std::move(c));
  }
  for (const auto use : header.getUses()) {
    m.uses.push_back({use.getEpoch(), use.getChunk(), use.getCount()});
  }
  RETURN_IF_ERROR(CheckEntryCount<schema::MapProof>(header.getMapProofs(), header_bytes,
                                                    "map proofs", m.type, sender));
  RETURN_IF_ERROR(CheckEntryCount<schema::Chain>(header.getCaughtUp(), header_bytes,
                                                 "caught-up chains", m.type, sender));
  for (const auto proof : header.getMapProofs()) {
    MapProof p;
    p.name = proof.getName().cStr();
    const auto tag = proof.getTag();
    p.tag.assign(reinterpret_cast<const char*>(tag.begin()), tag.size());
    m.map_proofs.push_back(std::move(p));
  }
  for (const auto chain : header.getCaughtUp()) {
    Chain c;
    c.shard = chain.getShard();
    for (int32_t t : chain.getTasks()) c.tasks.push_back(t);
    m.caught_up.push_back(std::move(c));
  }
  const auto link = header.getLink();
  m.link.assign(reinterpret_cast<const char*>(link.begin()), link.size());

  const auto metas = header.getTensors();
  if (frames.size() != size_t{metas.size()} + 1) {
    return DataLoss(StrCat("the header of a ", MessageTypeName(m.type), " from ", sender, " lists ",
                           metas.size(), " tensors but ", frames.size() - 1,
                           " tensor frames came with it (expected one frame per tensor)"));
  }
  m.tensors.reserve(metas.size());
  for (uint32_t i = 0; i < metas.size(); ++i) {
    const auto meta = metas[i];
    std::string name = TextOf(meta.getName());
    if (!ValidName(name)) {
      return InvalidArgument(StrCat("tensor ", i, " of ", metas.size(), " in the ",
                                    MessageTypeName(m.type), " from ", sender,
                                    " has an empty name or one holding a NUL byte"));
    }
    ASSIGN_OR_RETURN(const TensorDType dtype,
                     DTypeOf(meta.getDtype(), StrCat("tensor '", name, "' from ", sender)));
    const char* dtype_name = dtype == TensorDType::kBfloat16 ? "bfloat16" : "float32";
    const auto shape = meta.getShape();
    std::vector<int64_t> dims;
    dims.reserve(shape.size());
    for (int64_t d : shape) dims.push_back(d);
    ASSIGN_OR_RETURN(const int64_t elements, CheckedElements(name, dims, limits));
    const uint64_t bytes = static_cast<uint64_t>(elements) *
                           (dtype == TensorDType::kBfloat16 ? sizeof(uint16_t) : sizeof(float));
    if (meta.getByteLength() != bytes) {
      return DataLoss(StrCat("tensor '", name, "' declares ", meta.getByteLength(),
                             " bytes but its shape ", ShapeString(dims), " of ", dtype_name,
                             " needs ", bytes));
    }
    const Frame& frame = frames[i + 1];
    if (frame.size != bytes) {
      return DataLoss(StrCat("tensor '", name, "' frame is ", frame.size, " bytes but its shape ",
                             ShapeString(dims), " of ", dtype_name, " needs ", bytes));
    }
    Tensor tensor = dtype == TensorDType::kBfloat16
                        ? TensorFromBfloat16Frame(std::move(dims), frame)
                        : TensorFromFrame(std::move(dims), frame);
    m.tensors.push_back({std::move(name), std::move(tensor), dtype});
  }
  return m;
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

}  // namespace

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
  header.setType(static_cast<schema::MessageType>(message.type));
  header.setRequestId(message.request_id);
  header.setRole(AsText(message.role));
  header.setTaskIndex(message.task_index);
  header.setStep(message.step);
  header.setValue(message.value);
  header.setIncarnation(message.incarnation);
  header.setSequence(message.sequence);
  header.setText(AsText(message.text));
  header.setErrorCode(static_cast<uint16_t>(message.error_code));
  RETURN_IF_ERROR(
      SetNames(message.names, "name", message.type, header.initNames(message.names.size())));
  header.setPullDtype(SchemaDType(message.pull_dtype));
  RETURN_IF_ERROR(SetNames(message.assigns, "assign", message.type,
                           header.initAssigns(message.assigns.size())));
  header.setRoot(message.root);
  auto steps = header.initSteps(message.steps.size());
  for (size_t i = 0; i < message.steps.size(); ++i) steps.set(i, message.steps[i]);
  header.setShard(message.shard);
  header.setMapEpoch(message.map_epoch);
  auto pushes = header.initPushes(message.pushes.size());
  for (size_t i = 0; i < message.pushes.size(); ++i) {
    const PushEntry& e = message.pushes[i];
    if (e.role.find('\0') != std::string::npos) {
      return InvalidArgument(StrCat("push entry ", i, " of the ", MessageTypeName(message.type),
                                    " names a role holding a NUL byte"));
    }
    auto p = pushes[i];
    p.setRole(AsText(e.role));
    p.setTaskIndex(e.task_index);
    p.setIncarnation(e.incarnation);
    p.setSequence(e.sequence);
    p.setReplyStep(e.reply_step);
    p.setReplyValue(e.reply_value);
    p.setReplyText(AsText(e.reply_text));
  }
  auto chains = header.initChains(message.chains.size());
  for (size_t i = 0; i < message.chains.size(); ++i) {
    const Chain& c = message.chains[i];
    auto chain = chains[i];
    chain.setShard(c.shard);
    auto tasks = chain.initTasks(c.tasks.size());
    for (size_t t = 0; t < c.tasks.size(); ++t) tasks.set(t, c.tasks[t]);
    auto joining = chain.initJoining(c.joining.size());
    for (size_t t = 0; t < c.joining.size(); ++t) joining.set(t, c.joining[t]);
  }
  auto proofs = header.initMapProofs(message.map_proofs.size());
  for (size_t i = 0; i < message.map_proofs.size(); ++i) {
    proofs[i].setName(AsText(message.map_proofs[i].name));
    const std::string& tag = message.map_proofs[i].tag;
    proofs[i].setTag(kj::arrayPtr(reinterpret_cast<const kj::byte*>(tag.data()), tag.size()));
  }
  auto caught_up = header.initCaughtUp(message.caught_up.size());
  for (size_t i = 0; i < message.caught_up.size(); ++i) {
    caught_up[i].setShard(message.caught_up[i].shard);
    auto tasks = caught_up[i].initTasks(message.caught_up[i].tasks.size());
    for (size_t t = 0; t < message.caught_up[i].tasks.size(); ++t) {
      tasks.set(t, message.caught_up[i].tasks[t]);
    }
  }
  if (!message.link.empty()) {
    header.setLink(
        kj::arrayPtr(reinterpret_cast<const kj::byte*>(message.link.data()), message.link.size()));
  }
  auto uses = header.initUses(message.uses.size());
  for (size_t i = 0; i < message.uses.size(); ++i) {
    uses[i].setEpoch(message.uses[i].epoch);
    uses[i].setChunk(message.uses[i].chunk);
    uses[i].setCount(message.uses[i].count);
  }
  EncodedMessage encoded;
  encoded.tensor_frames.reserve(message.tensors.size());
  auto metas = header.initTensors(message.tensors.size());
  for (size_t i = 0; i < message.tensors.size(); ++i) {
    const NamedTensor& t = message.tensors[i];
    if (!ValidName(t.name)) {
      return InvalidArgument(StrCat("tensor ", i, " of the ", MessageTypeName(message.type),
                                    " has an empty name or one holding a NUL byte"));
    }
    if (t.tensor.empty()) {
      return InvalidArgument(StrCat("tensor '", t.name, "' of the ", MessageTypeName(message.type),
                                    " has no buffer (a default-constructed Tensor)"));
    }
    auto meta = metas[i];
    meta.setName(AsText(t.name));
    const auto& dims = t.tensor.shape().dims();
    auto shape = meta.initShape(dims.size());
    for (size_t d = 0; d < dims.size(); ++d) shape.set(d, dims[d]);
    meta.setDtype(SchemaDType(t.dtype));
    meta.setByteLength(WireBytes(t));
    encoded.tensor_frames.push_back(FrameOf(t));
  }
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
                       const std::string& receiver) {
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
    return DecodeHeader(reader.getRoot<schema::Header>(), frames, limits, receiver);
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
