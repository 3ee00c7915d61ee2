// How a same-host client proves its key to a server without sending a secret (same_host.h).
// ZMTP PLAIN carries a user name and a password in the clear to whoever holds the socket's other
// end; the password is therefore not a secret key but a proof bound to the pair:
//
//   proof = PairTag(client secret, server public, "pstrain same-host proof v1", client name)
//           (pair_tag.h), in Z85 (40 characters)
//
// The server computes the same value from its own secret key and the client's registered
// public key (X25519 is symmetric), so only the holder of that client's secret key, or of the
// server's, can make it. What the other end learns is worth nothing elsewhere: it proves the
// client only to that one server, and it reveals neither secret key.
#pragma once

#include <string>

#include "common/status.h"

namespace pstrain {
namespace wire {

// `own_secret` and `peer_public` are Z85 CURVE keys (40 characters); `client_name` is the
// client's key name ("worker-1"). The client passes its secret and the server's public key; the
// server its secret and the client's public key.
Result<std::string> SameHostProof(const std::string& own_secret, const std::string& peer_public,
                                  const std::string& client_name);

// Whether two proofs are equal, in time that does not depend on where they differ.
bool SameProof(const std::string& a, const std::string& b);

}  // namespace wire
}  // namespace pstrain
