// The link that ties each replication record to the records before it (docs/replication.md
// section 3). A chain's head draws a random link when it first holds the shard; each record
// carries the link before it, and every replica that applies the record moves its link on to
// NextLink(link, record). A replica takes a record only if the record's link equals its own: so
// a record follows from every record before it in this chain, and a sender that has not seen
// the chain's copy and records (a stolen predecessor's key used from elsewhere) cannot make one
// that is taken, whatever sequence number it guesses. A joiner gets the link with its copy.
// Copies and records travel encrypted (CURVE) or between one host's processes.
#pragma once

#include <string>

#include "common/wire/keyed_hash.h"
#include "common/wire/message.h"

namespace pstrain {
namespace wire {

constexpr size_t kChainLinkBytes = 32;

// 32 random bytes: the link before a chain's first record.
std::string NewChainLink();

// The link after `record`: keyed BLAKE2b over what a record's replicas agree on (shard,
// sequence, steps, the tensors' names and sizes, assigns and retry-cache entries), not the
// sender's own fields, which change hop by hop.
std::string NextChainLink(const std::string& link, const Message& record);

// Writes into `h` what the link covers of `record` (the head's tags cover it too, and more:
// record_tag.h).
void HashRecordPlace(const Message& record, KeyedHash* h);

}  // namespace wire
}  // namespace pstrain
