#include "worker/network/layers/flatten.h"

namespace pstrain {
namespace worker {

Status Flatten::Configure(const ConfigNode& node) {
  return node.CheckKeys({"name", "type", "inputs"});
}

PSTRAIN_REGISTER_LAYER("flatten", Flatten);

}  // namespace worker
}  // namespace pstrain
