// What every answer of a parameter server task carries, whoever makes it: the task itself
// (ps/server_task.h) or one of the shards it holds (ps/server.h). A client reads one envelope
// either way, and an error names the server first ("ps 1: ..."). A peer that sends the same bad
// request again and again is logged once per 10 s, not per request (the log would otherwise be
// the cheapest way to fill a server's disk).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/wire/message.h"
#include "ps/outgoing.h"

namespace pstrain {
namespace ps {

// Who answers, and what its replies report.
struct ReplySource {
  int task = 0;            // this server task's index
  uint64_t map_epoch = 0;  // of the shard map it holds
  int64_t step = 0;
};

// A message of `type` from this process as server task `task`: role, task and incarnation set,
// nothing else.
wire::Message FromServerTask(int task, wire::MessageType type);
// The reply of `type` to `request`: its request id, the shard that answers when the request
// named one, and `from`'s epoch and step.
wire::Message ReplyTo(const wire::Message& request, wire::MessageType type,
                      const ReplySource& from);
// An error reply "ps <task>: <what>" of `code`, logged under `log_kind` by sender, request type
// and code.
wire::Message ErrorTo(const wire::Message& request, const std::string& what, StatusCode code,
                      const ReplySource& from, const std::string& log_kind);
// A request its sender may not make (its key, role or incarnation): "ps <task>: refused <type>:
// <why>", logged by key, sender and request type. `identity`: the connection's key name (empty
// in plaintext).
wire::Message RefusalTo(const wire::Message& request, const Status& why,
                        const std::string& identity, const ReplySource& from);

// The tensor bytes of `m` as they travel: a bfloat16 tensor counts 2 an element, though it is
// float32 here.
int64_t WireTensorBytes(const wire::Message& m);
// WireTensorBytes of the replies in `out`; requests to other tasks (records, copies) are counted
// as replicated, not here.
int64_t ReplyBytes(const std::vector<Outgoing>& out);

}  // namespace ps
}  // namespace pstrain
