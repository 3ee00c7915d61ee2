// A tag that only two key holders can make: BLAKE2b-256 of a message, keyed with the X25519
// secret that one party's CURVE secret key shares with the other's public key. Either side makes
// the same tag from its own secret and the other's public key; nobody else can, and the tag
// reveals neither secret. It proves a message to one peer (a MAC), not to the world (a
// signature): the same-host proof (same_host_proof.h) and the chief's shard-map proofs
// (map_proof.h) are made with it.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "common/status.h"

namespace pstrain {
namespace wire {

// `own_secret` and `peer_public`: Z85 CURVE keys (40 characters). `context` names the use, so
// that a tag made for one never passes for another. 32 bytes.
Result<std::string> PairTag(const std::string& own_secret, const std::string& peer_public,
                            const std::string& context, const std::string& message);

// PairTag for many messages to the same few peers: each pair's key (the X25519 product, most of
// a tag's cost) is made once and kept, wiped when this object goes. Peers are the caller's own
// key files' public keys, never a network's, so the keys kept stay few.
class PairKeys {
 public:
  explicit PairKeys(std::string own_secret) : own_secret_(std::move(own_secret)) {}
  ~PairKeys();
  PairKeys(const PairKeys&) = delete;
  PairKeys& operator=(const PairKeys&) = delete;
  // The same tag as PairTag(own_secret, peer_public, context, message).
  Result<std::string> Tag(const std::string& peer_public, const std::string& context,
                          const std::string& message);

 private:
  std::string own_secret_;
  std::map<std::string, std::string> keys_;  // by the peer's public key
};

// Whether two tags are equal, in time that does not depend on where they differ.
bool SameTag(const std::string& a, const std::string& b);

}  // namespace wire
}  // namespace pstrain
