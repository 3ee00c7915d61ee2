// Whether the head of a shard vouches for each record a replica takes (common/wire/record_tag.h,
// docs/replication.md section 3). The head stamps each record with the map epoch it makes it
// under and tags it for every other server key. A replica learns which head made a record from
// that epoch: the head of the newest map it holds at or before it (the oldest it holds, for a
// record made before its first). Made epochs only grow along a chain's records, so a record
// may not go back to an older epoch than the last one taken: a server that was once head
// cannot pass a record off as made in its own era. Records resent to a new successor after a
// failover keep the old head's epoch and tags, and are checked against that head.
//
// The chain link (record_checks.h) proves where a record stands; this proves what it holds.
// Without keys (plaintext) nothing is tagged or checked.
#pragma once

#include <cstdint>
#include <map>

#include "common/status.h"
#include "common/wire/curve.h"
#include "common/wire/message.h"
#include "common/wire/pair_tag.h"

namespace pstrain {
namespace ps {

class RecordSignature {
 public:
  // `keys`: this task's ps-<t> keys (empty: plaintext).
  explicit RecordSignature(wire::ClusterKeys keys)
      : keys_(std::move(keys)), pairs_(keys_.own.secret_key) {}

  // A map this replica now holds, whose head of the shard is task `head` (-1: none).
  void SawMap(uint64_t epoch, int head);
  // The head: stamps `record` as made under map `epoch` and attaches its tags.
  Status Sign(uint64_t epoch, wire::Message* record) const;
  // A replica, before applying: the record's epoch does not go back, and its head's tag for
  // this server checks out. Errors name the shard, the record's sequence and the head task.
  Status Check(const wire::Message& record) const;
  // The record was applied: later ones may not be made under an older map.
  void Took(const wire::Message& record);
  // A copy was installed: the records after it may be made under any map this replica holds.
  void Reset() { last_made_ = 0; }

 private:
  // The head of the newest map held at or before `epoch`; -1 when no map is held.
  int HeadAt(uint64_t epoch) const;

  wire::ClusterKeys keys_;
  mutable wire::PairKeys pairs_;   // this server's key with each other's, made once
  std::map<uint64_t, int> heads_;  // by map epoch, the newest few
  uint64_t last_made_ = 0;
};

}  // namespace ps
}  // namespace pstrain
