#include "common/wire/same_host_proof.h"

#include <sodium.h>
#include <zmq.h>

#include <cstdint>

namespace pstrain {
namespace wire {
namespace {

constexpr char kContext[] = "pstrain same-host proof v1";

Status Decode(const std::string& z85, const char* what, unsigned char out[32]) {
  if (z85.size() != 40 || zmq_z85_decode(out, z85.c_str()) == nullptr) {
    return InvalidArgument(std::string(what) + " is not a CURVE key (expected 40 Z85 characters)");
  }
  return Status::OK();
}

}  // namespace

Result<std::string> SameHostProof(const std::string& own_secret, const std::string& peer_public,
                                  const std::string& client_name) {
  if (sodium_init() < 0) return Internal("libsodium could not be initialised");
  unsigned char secret[32], peer[32], shared[crypto_scalarmult_BYTES];
  RETURN_IF_ERROR(Decode(own_secret, "the secret key", secret));
  RETURN_IF_ERROR(Decode(peer_public, "the peer's public key", peer));
  const int bad = crypto_scalarmult(shared, secret, peer);
  sodium_memzero(secret, sizeof(secret));
  if (bad != 0) return InvalidArgument("the peer's public key is a weak Curve25519 point");
  crypto_generichash_state state;
  crypto_generichash_init(&state, shared, sizeof(shared), 32);
  crypto_generichash_update(&state, reinterpret_cast<const unsigned char*>(kContext),
                            sizeof(kContext));
  crypto_generichash_update(&state, reinterpret_cast<const unsigned char*>(client_name.data()),
                            client_name.size());
  unsigned char digest[32];
  crypto_generichash_final(&state, digest, sizeof(digest));
  sodium_memzero(shared, sizeof(shared));
  char text[41] = {0};
  if (zmq_z85_encode(text, digest, sizeof(digest)) == nullptr) {
    return Internal("Z85 encoding of the same-host proof failed");
  }
  return std::string(text, 40);
}

bool SameProof(const std::string& a, const std::string& b) {
  return a.size() == b.size() && sodium_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace wire
}  // namespace pstrain
