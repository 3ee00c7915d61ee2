// Which fields each request type may carry (the table in message.h), checked on receipt: a
// request carrying a field of another type is refused naming the field, instead of the field
// being read as something else or ignored. gloo gives each purpose its own message; pstrain keeps
// one Cap'n Proto header for the zero-copy tensor frames, and this table keeps its fields apart.
#pragma once

#include "common/status.h"
#include "common/wire/message.h"

namespace pstrain {
namespace wire {

// OK when `request` carries only its type's fields (and its push assigns name pushed tensors);
// InvalidArgument naming the first field that does not belong ("a pull carries no 'sequence'").
Status CheckRequestFields(const Message& request);

}  // namespace wire
}  // namespace pstrain
