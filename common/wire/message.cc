#include "common/wire/message.h"

#include <chrono>
#include <random>

#include "common/enum_names.h"

namespace pstrain {
namespace wire {

uint64_t ProcessIncarnation() {
  // Microseconds since the epoch above 12 random bits: a process started later has a larger
  // id, so a server can refuse the requests of an older process (a zombie) once a newer one of
  // the same role and task has spoken; the random bits tell apart two started in the same
  // microsecond.
  static const uint64_t id = [] {
    std::random_device device;
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    const uint64_t micros = std::chrono::duration_cast<std::chrono::microseconds>(now).count();
    return (micros << 12) | (device() & 0xfff) | 1;
  }();
  return id;
}

constexpr EnumName<MessageType> kMessageTypes[] = {{MessageType::kRegister, "register"},
                                                   {MessageType::kPull, "pull"},
                                                   {MessageType::kPush, "push"},
                                                   {MessageType::kBarrier, "barrier"},
                                                   {MessageType::kHeartbeat, "heartbeat"},
                                                   {MessageType::kCheckpoint, "checkpoint"},
                                                   {MessageType::kShutdown, "shutdown"},
                                                   {MessageType::kOk, "ok"},
                                                   {MessageType::kError, "error"},
                                                   {MessageType::kStoreSet, "store set"},
                                                   {MessageType::kStoreGet, "store get"},
                                                   {MessageType::kCollective, "collective"},
                                                   {MessageType::kRestore, "restore"},
                                                   {MessageType::kReplicate, "replicate"},
                                                   {MessageType::kReplicaCopy, "replica copy"},
                                                   {MessageType::kShardMap, "shard map"},
                                                   {MessageType::kDataLease, "data lease"},
                                                   {MessageType::kRowPull, "row pull"},
                                                   {MessageType::kRowPush, "row push"}};

const char* MessageTypeName(MessageType type) { return NameOf(kMessageTypes, type); }

bool operator==(const PushEntry& a, const PushEntry& b) {
  return a.role == b.role && a.task_index == b.task_index && a.incarnation == b.incarnation &&
         a.sequence == b.sequence && a.reply_step == b.reply_step &&
         a.reply_value == b.reply_value && a.reply_text == b.reply_text;
}

bool operator==(const Chain& a, const Chain& b) {
  return a.shard == b.shard && a.tasks == b.tasks && a.joining == b.joining;
}

size_t WireBytes(const NamedTensor& t) {
  const size_t element = t.dtype == TensorDType::kBfloat16 ? sizeof(uint16_t) : sizeof(float);
  return static_cast<size_t>(t.tensor.size()) * element;
}

bool operator==(const ChunkUse& a, const ChunkUse& b) {
  return a.epoch == b.epoch && a.chunk == b.chunk && a.count == b.count;
}

Message ErrorReply(const Message& request, const Status& status) {
  Message reply;
  reply.type = MessageType::kError;
  reply.request_id = request.request_id;
  reply.text = status.message();
  reply.error_code = status.ok() ? StatusCode::kInternal : status.code();
  return reply;
}

Status StatusOfReply(const Message& reply) {
  if (reply.type != MessageType::kError) return Status::OK();
  const StatusCode code =
      reply.error_code == StatusCode::kOk ? StatusCode::kInternal : reply.error_code;
  return Status(code, reply.text.empty() ? "error reply without a message" : reply.text);
}

}  // namespace wire
}  // namespace pstrain
