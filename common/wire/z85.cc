#include "common/wire/z85.h"

#include <zmq.h>

#include <cstdint>

namespace pstrain {
namespace wire {

std::optional<std::string> Z85Of32(const std::string& binary) {
  char text[41] = {0};
  if (binary.size() != 32 ||
      zmq_z85_encode(text, reinterpret_cast<const uint8_t*>(binary.data()), 32) == nullptr) {
    return std::nullopt;
  }
  return std::string(text, 40);
}

std::optional<std::string> BytesOfZ85Key(const std::string& text) {
  std::string binary(32, '\0');
  if (text.size() != 40 ||
      zmq_z85_decode(reinterpret_cast<uint8_t*>(binary.data()), text.c_str()) == nullptr) {
    return std::nullopt;
  }
  return binary;
}

}  // namespace wire
}  // namespace pstrain
