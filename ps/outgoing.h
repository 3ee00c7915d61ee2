// What handling a request sends: replies to the connection that sent it, and requests to other
// server tasks (replication records, snapshots to a joiner).
#pragma once

#include <string>

#include "common/wire/message.h"

namespace pstrain {
namespace ps {

struct Outgoing {
  std::string peer;  // a reply to the connection that sent the request
  wire::Message message;
  // >= 0: not a reply but a request to server task `task` (a record to this shard's successor,
  // a snapshot to a joiner), sent over the owning ServerTask's connection to that task; its
  // reply comes back through ParameterServer::HandleServerReply.
  int task = -1;
};

}  // namespace ps
}  // namespace pstrain
