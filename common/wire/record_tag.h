// The head's tags of a replication record (docs/replication.md section 3). The chain link
// (chain_link.h) ties a record to the ones before it, but a middle replica forwards records: who
// holds its key could change a record's tensors on the way, and the replicas behind it would
// apply them. So the head vouches for each record's content: it attaches one tag per other
// server key of the cluster, made with PairTag (pair_tag.h) from its secret key and that
// server's public key over the record's digest, as the chief proves shard maps (map_proof.h).
// Middle replicas pass the tags on untouched and cannot make one; each replica checks its own
// before applying. Every server key gets one, not only the chain's members of the head's map:
// a joiner, or a new successor after a failover, takes records made under a map that did not
// name it.
//
// Plaintext clusters carry no tags and check none (nothing is authenticated there).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "common/wire/curve.h"
#include "common/wire/message.h"
#include "common/wire/pair_tag.h"

namespace pstrain {
namespace wire {

// BLAKE2b-256 of what every replica of the record must apply alike: shard, sequence, steps, the
// epoch it was made under, its link, the head's stamp of its state (ps/state_stamps.h), each
// tensor's name, shape and bytes, assigns, retry-cache entries and ledger uses. Not the sender's
// own fields, which change hop by hop.
std::string RecordDigest(const Message& record);

// The tags of `record` from the head's keys `head` (a ps-<t> key set) for every other server
// key; none in plaintext. `pairs`, if given, was made from head.own's secret key and keeps the
// pairs' keys from record to record.
Result<std::vector<MapProof>> TagRecord(const Message& record, const ClusterKeys& head,
                                        PairKeys* pairs = nullptr);

// OK if `record` carries this server's (`own`'s) valid tag from ps task `head_task`'s key;
// else an error naming the shard, the record's sequence and the head task. OK in plaintext.
// `pairs`, if given, was made from own.own's secret key.
Status CheckRecordTag(const Message& record, int head_task, const ClusterKeys& own,
                      PairKeys* pairs = nullptr);

}  // namespace wire
}  // namespace pstrain
