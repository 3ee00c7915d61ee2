// 32-byte CURVE keys and tags as ZeroMQ's Z85 text (40 characters), and back.
#pragma once

#include <optional>
#include <string>

namespace pstrain {
namespace wire {

// The 40 Z85 characters of `binary`; nothing unless it is 32 bytes.
std::optional<std::string> Z85Of32(const std::string& binary);

// The 32 bytes `text` encodes; nothing unless it is 40 valid Z85 characters.
std::optional<std::string> BytesOfZ85Key(const std::string& text);

}  // namespace wire
}  // namespace pstrain
