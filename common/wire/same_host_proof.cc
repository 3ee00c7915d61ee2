#include "common/wire/same_host_proof.h"

#include <zmq.h>

#include "common/wire/pair_tag.h"

namespace pstrain {
namespace wire {

Result<std::string> SameHostProof(const std::string& own_secret, const std::string& peer_public,
                                  const std::string& client_name) {
  ASSIGN_OR_RETURN(std::string tag,
                   PairTag(own_secret, peer_public, "pstrain same-host proof v1", client_name));
  char text[41] = {0};
  if (zmq_z85_encode(text, reinterpret_cast<const uint8_t*>(tag.data()), tag.size()) == nullptr) {
    return Internal("Z85 encoding of the same-host proof failed");
  }
  return std::string(text, 40);
}

bool SameProof(const std::string& a, const std::string& b) { return SameTag(a, b); }

}  // namespace wire
}  // namespace pstrain
