#include "common/wire/chain_link.h"

#include <glog/logging.h>
#include <sodium.h>

namespace pstrain {
namespace wire {

std::string NewChainLink() {
  CHECK(sodium_init() >= 0) << "libsodium could not be initialised";
  std::string link(kChainLinkBytes, '\0');
  randombytes_buf(link.data(), link.size());
  return link;
}

void HashRecordPlace(const Message& record, KeyedHash* h) {
  h->Number(record.shard);
  h->Number(record.sequence);
  h->Number(record.step);
  h->Number(record.value);
  h->Number(record.tensors.size());
  for (const NamedTensor& t : record.tensors) {
    h->String(t.name);
    h->Number(t.tensor.bytes());
  }
  h->Number(record.assigns.size());
  for (const std::string& a : record.assigns) h->String(a);
  h->Number(record.pushes.size());
  for (const PushEntry& e : record.pushes) {
    h->String(e.role);
    h->Number(e.task_index);
    h->Number(e.incarnation);
    h->Number(e.sequence);
  }
}

std::string NextChainLink(const std::string& link, const Message& record) {
  KeyedHash h(link, kChainLinkBytes);
  HashRecordPlace(record, &h);
  return h.Final();
}

}  // namespace wire
}  // namespace pstrain
