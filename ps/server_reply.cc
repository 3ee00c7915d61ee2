#include "ps/server_reply.h"

#include "common/wire/refusal_log.h"

namespace pstrain {
namespace ps {

using wire::Message;
using wire::MessageType;

namespace {
std::string SenderOf(const Message& request) {
  return request.role + " " + std::to_string(request.task_index);
}
}  // namespace

Message FromServerTask(int task, MessageType type) {
  Message m;
  m.type = type;
  m.role = "ps";
  m.task_index = task;
  m.incarnation = wire::ProcessIncarnation();
  return m;
}

Message ReplyTo(const Message& request, MessageType type, const ReplySource& from) {
  Message m = FromServerTask(from.task, type);
  m.request_id = request.request_id;
  m.map_epoch = from.map_epoch;
  m.step = from.step;
  if (request.shard >= 0) m.shard = request.shard;  // which shard answers (ps/server_task.h)
  return m;
}

Message ErrorTo(const Message& request, const std::string& what, StatusCode code,
                const ReplySource& from, const std::string& log_kind) {
  Message m = ReplyTo(request, MessageType::kError, from);
  m.text = "ps " + std::to_string(from.task) + ": " + what;
  m.error_code = code;
  PSTRAIN_REFUSAL_WARNING(log_kind + ":" + std::to_string(static_cast<int>(code)) +
                              SenderOf(request) + wire::MessageTypeName(request.type),
                          m.text + " (request " + wire::MessageTypeName(request.type) + " from " +
                              SenderOf(request) + ")");
  return m;
}

Message RefusalTo(const Message& request, const Status& why, const std::string& identity,
                  const ReplySource& from) {
  Message m = ReplyTo(request, MessageType::kError, from);
  m.text = "ps " + std::to_string(from.task) + ": refused " + wire::MessageTypeName(request.type) +
           ": " + why.message();
  m.error_code = why.code();
  PSTRAIN_REFUSAL_WARNING(
      "ps-refused:" + identity + request.role + std::to_string(request.task_index) +
          wire::MessageTypeName(request.type),
      m.text + (identity.empty() ? " (plaintext connection)" : " (key of " + identity + ")"));
  return m;
}

int64_t WireTensorBytes(const Message& m) {
  int64_t n = 0;
  for (const auto& t : m.tensors) n += static_cast<int64_t>(wire::WireBytes(t));
  return n;
}

int64_t ReplyBytes(const std::vector<Outgoing>& out) {
  int64_t n = 0;
  for (const Outgoing& o : out) n += o.task < 0 ? WireTensorBytes(o.message) : 0;
  return n;
}

}  // namespace ps
}  // namespace pstrain
