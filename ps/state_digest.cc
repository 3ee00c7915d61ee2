#include "ps/state_digest.h"

#include "common/crc32c.h"

namespace pstrain {
namespace ps {

uint32_t StateCrc32c(const VariableStore& store) {
  uint32_t crc = 0;
  for (const auto& [name, tensor] : store.StateTensors()) {
    crc = crc32c::Extend(crc, name.data(), name.size() + 1);  // with its NUL: names stay apart
    crc = crc32c::Extend(crc, tensor.data(), tensor.bytes());
  }
  return crc;
}

}  // namespace ps
}  // namespace pstrain
