// A request as its sender addresses it: the type, and who sends it (role, task index, and the
// incarnation of the sending process). Every other field of a Message is the request's own, so
// the tests and fuzz seeds that build requests start from this and add those.
#pragma once

#include <cstdint>
#include <string>

#include "common/wire/message.h"

namespace pstrain {
namespace wire {

inline Message Request(MessageType type, const std::string& role, int task_index,
                       uint64_t incarnation = 0) {
  Message m;
  m.type = type;
  m.role = role;
  m.task_index = task_index;
  m.incarnation = incarnation;
  return m;
}

}  // namespace wire
}  // namespace pstrain
