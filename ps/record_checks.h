// What a replica checks of a replication record, or of a copy's retry-cache entries, before
// anything changes (ps/server_replication.cc applies what passes; docs/replication.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/wire/message.h"
#include "ps/variable_store.h"

namespace pstrain {
namespace ps {

// Where a replica of a shard stands: the records it holds, the link the next must carry, its
// global step, its variables, and the cluster's workers (0: unknown, not checked).
struct ReplicaPlace {
  int shard;
  int64_t records;
  const std::string& link;
  int64_t global_step;
  const VariableStore& store;
  int workers;
};

// The next record, and only it: its sequence, its chain link, a step the same or the next, each
// tensor a valid gradient or value of this shard, each gradient once, and its entries.
Status CheckRecordFollows(const wire::Message& record, const ReplicaPlace& here);

// A record's or a copy's retry-cache entries: the cluster's workers (or the chief), each at most
// once, each push > 0; the entries become the peer table, which must stay the cluster's.
Status CheckPushEntries(const std::vector<wire::PushEntry>& entries, int workers);

}  // namespace ps
}  // namespace pstrain
