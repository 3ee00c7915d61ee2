#include "common/wire/chain_link.h"

#include <glog/logging.h>
#include <sodium.h>

#include <algorithm>

namespace pstrain {
namespace wire {
namespace {

class Hash {
 public:
  explicit Hash(const std::string& key) {
    crypto_generichash_init(&state_, reinterpret_cast<const unsigned char*>(key.data()),
                            std::min(key.size(), size_t{crypto_generichash_KEYBYTES_MAX}),
                            kChainLinkBytes);
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
  std::string Final() {
    std::string out(kChainLinkBytes, '\0');
    crypto_generichash_final(&state_, reinterpret_cast<unsigned char*>(out.data()), out.size());
    return out;
  }

 private:
  void Bytes(const void* p, size_t n) {
    crypto_generichash_update(&state_, static_cast<const unsigned char*>(p), n);
  }
  crypto_generichash_state state_;
};

}  // namespace

std::string NewChainLink() {
  CHECK(sodium_init() >= 0) << "libsodium could not be initialised";
  std::string link(kChainLinkBytes, '\0');
  randombytes_buf(link.data(), link.size());
  return link;
}

std::string NextChainLink(const std::string& link, const Message& record) {
  Hash h(link);
  h.Number(record.shard);
  h.Number(record.sequence);
  h.Number(record.step);
  h.Number(record.value);
  h.Number(record.tensors.size());
  for (const NamedTensor& t : record.tensors) {
    h.String(t.name);
    h.Number(t.tensor.bytes());
  }
  h.Number(record.assigns.size());
  for (const std::string& a : record.assigns) h.String(a);
  h.Number(record.pushes.size());
  for (const PushEntry& e : record.pushes) {
    h.String(e.role);
    h.Number(e.task_index);
    h.Number(e.incarnation);
    h.Number(e.sequence);
  }
  return h.Final();
}

}  // namespace wire
}  // namespace pstrain
