// BLAKE2b (libsodium's generichash) over a sequence of numbers, strings and raw bytes, written
// so that no two different sequences hash alike (numbers at a fixed width, strings after their
// length). The chain link (chain_link.h) and a record's digest (record_tag.h) are made with it.
#pragma once

#include <sodium.h>

#include <algorithm>
#include <cstdint>
#include <string>

namespace pstrain {
namespace wire {

class KeyedHash {
 public:
  // `key`: up to 64 bytes (longer is cut); empty: an unkeyed hash. `bytes`: 16 to 64.
  KeyedHash(const std::string& key, size_t bytes) : bytes_(bytes) {
    crypto_generichash_init(&state_, reinterpret_cast<const unsigned char*>(key.data()),
                            std::min(key.size(), size_t{crypto_generichash_KEYBYTES_MAX}), bytes);
  }
  template <typename T>
  void Number(T n) {
    const int64_t v = static_cast<int64_t>(n);
    Bytes(&v, sizeof(v));
  }
  // Length first, so that no two sequences of strings hash alike.
  void String(const std::string& s) {
    Number(s.size());
    Bytes(s.data(), s.size());
  }
  void Bytes(const void* p, size_t n) {
    crypto_generichash_update(&state_, static_cast<const unsigned char*>(p), n);
  }
  std::string Final() {
    std::string out(bytes_, '\0');
    crypto_generichash_final(&state_, reinterpret_cast<unsigned char*>(out.data()), out.size());
    return out;
  }

 private:
  size_t bytes_;
  crypto_generichash_state state_;
};

}  // namespace wire
}  // namespace pstrain
