#include "common/wire/same_host_proof.h"

#include "common/wire/pair_tag.h"
#include "common/wire/z85.h"

namespace pstrain {
namespace wire {

Result<std::string> SameHostProof(const std::string& own_secret, const std::string& peer_public,
                                  const std::string& client_name) {
  ASSIGN_OR_RETURN(std::string tag,
                   PairTag(own_secret, peer_public, "pstrain same-host proof v1", client_name));
  std::optional<std::string> text = Z85Of32(tag);
  if (!text) return Internal("Z85 encoding of the same-host proof failed");
  return *text;
}

bool SameProof(const std::string& a, const std::string& b) { return SameTag(a, b); }

}  // namespace wire
}  // namespace pstrain
