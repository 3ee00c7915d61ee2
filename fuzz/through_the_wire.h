// What the network would deliver of a message a target builds: Encode refuses what no peer can
// send (false), and what encodes must decode again. For targets that feed a server's handler.
#pragma once

#include <glog/logging.h>

#include <utility>

#include "common/wire/codec.h"

namespace pstrain {
namespace fuzz {

inline bool ThroughTheWire(wire::Message* m) {
  auto encoded = wire::Encode(*m);
  if (!encoded.ok()) return false;
  auto decoded = wire::Decode(wire::FramesOf(*encoded));
  CHECK(decoded.ok()) << "an encoded message does not decode: " << decoded.status().ToString();
  *m = std::move(decoded).value();
  return true;
}

}  // namespace fuzz
}  // namespace pstrain
