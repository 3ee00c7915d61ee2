// A tag that only two key holders can make: BLAKE2b-256 of a message, keyed with the X25519
// secret that one party's CURVE secret key shares with the other's public key. Either side makes
// the same tag from its own secret and the other's public key; nobody else can, and the tag
// reveals neither secret. It proves a message to one peer (a MAC), not to the world (a
// signature): the same-host proof (same_host_proof.h) and the chief's shard-map proofs
// (map_proof.h) are made with it.
#pragma once

#include <string>

#include "common/status.h"

namespace pstrain {
namespace wire {

// `own_secret` and `peer_public`: Z85 CURVE keys (40 characters). `context` names the use, so
// that a tag made for one never passes for another. 32 bytes.
Result<std::string> PairTag(const std::string& own_secret, const std::string& peer_public,
                            const std::string& context, const std::string& message);

// Whether two tags are equal, in time that does not depend on where they differ.
bool SameTag(const std::string& a, const std::string& b);

}  // namespace wire
}  // namespace pstrain
