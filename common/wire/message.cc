#include "common/wire/message.h"

#include <random>

namespace pstrain {
namespace wire {

uint64_t ProcessIncarnation() {
  static const uint64_t id = [] {
    std::random_device device;
    uint64_t v = 0;
    while (v == 0) v = (uint64_t{device()} << 32) ^ device();
    return v;
  }();
  return id;
}

const char* MessageTypeName(MessageType type) {
  switch (type) {
    case MessageType::kRegister:
      return "register";
    case MessageType::kPull:
      return "pull";
    case MessageType::kPush:
      return "push";
    case MessageType::kBarrier:
      return "barrier";
    case MessageType::kHeartbeat:
      return "heartbeat";
    case MessageType::kCheckpoint:
      return "checkpoint";
    case MessageType::kShutdown:
      return "shutdown";
    case MessageType::kOk:
      return "ok";
    case MessageType::kError:
      return "error";
    case MessageType::kStoreSet:
      return "store set";
    case MessageType::kStoreGet:
      return "store get";
    case MessageType::kCollective:
      return "collective";
  }
  return "unknown";
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
