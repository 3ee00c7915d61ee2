#include "common/wire/pair_tag.h"

#include <sodium.h>

#include <algorithm>

#include "common/wire/z85.h"

namespace pstrain {
namespace wire {
namespace {

Status Decode(const std::string& z85, const char* what, unsigned char out[32]) {
  std::optional<std::string> binary = BytesOfZ85Key(z85);
  if (!binary) {
    return InvalidArgument(std::string(what) + " is not a CURVE key (expected 40 Z85 characters)");
  }
  std::copy(binary->begin(), binary->end(), out);
  sodium_memzero(binary->data(), binary->size());
  return Status::OK();
}

// The pair's key: the X25519 secret `own_secret` shares with `peer_public`.
Result<std::string> PairKey(const std::string& own_secret, const std::string& peer_public) {
  if (sodium_init() < 0) return Internal("libsodium could not be initialised");
  unsigned char secret[32], peer[32];
  RETURN_IF_ERROR(Decode(own_secret, "the secret key", secret));
  RETURN_IF_ERROR(Decode(peer_public, "the peer's public key", peer));
  std::string shared(crypto_scalarmult_BYTES, '\0');
  const int bad = crypto_scalarmult(reinterpret_cast<unsigned char*>(shared.data()), secret, peer);
  sodium_memzero(secret, sizeof(secret));
  if (bad != 0) return InvalidArgument("the peer's public key is a weak Curve25519 point");
  return shared;
}

std::string TagWithKey(const std::string& key, const std::string& context,
                       const std::string& message) {
  crypto_generichash_state state;
  crypto_generichash_init(&state, reinterpret_cast<const unsigned char*>(key.data()), key.size(),
                          32);
  // The context with its terminating NUL, so that no context is a prefix of context + message.
  crypto_generichash_update(&state, reinterpret_cast<const unsigned char*>(context.c_str()),
                            context.size() + 1);
  crypto_generichash_update(&state, reinterpret_cast<const unsigned char*>(message.data()),
                            message.size());
  std::string tag(32, '\0');
  crypto_generichash_final(&state, reinterpret_cast<unsigned char*>(tag.data()), tag.size());
  return tag;
}

}  // namespace

Result<std::string> PairTag(const std::string& own_secret, const std::string& peer_public,
                            const std::string& context, const std::string& message) {
  ASSIGN_OR_RETURN(std::string key, PairKey(own_secret, peer_public));
  std::string tag = TagWithKey(key, context, message);
  sodium_memzero(key.data(), key.size());
  return tag;
}

PairKeys::~PairKeys() {
  for (auto& [peer, key] : keys_) sodium_memzero(key.data(), key.size());
}

Result<std::string> PairKeys::Tag(const std::string& peer_public, const std::string& context,
                                  const std::string& message) {
  auto it = keys_.find(peer_public);
  if (it == keys_.end()) {
    ASSIGN_OR_RETURN(std::string key, PairKey(own_secret_, peer_public));
    it = keys_.emplace(peer_public, std::move(key)).first;
  }
  return TagWithKey(it->second, context, message);
}

bool SameTag(const std::string& a, const std::string& b) {
  return a.size() == b.size() && sodium_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace wire
}  // namespace pstrain
