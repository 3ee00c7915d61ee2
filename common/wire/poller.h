// Waiting on a server socket and several connections at once. A parameter server that forwards
// records to other servers (docs/replication.md, section 3) must read its clients' requests and
// its successors' acknowledgements on one thread, without stalling either: Receive on one socket
// would block the others. As ZeroMQ's own zmq_poll over every socket's handles (the sockets and
// their handshake monitors), so that a refused handshake wakes the waiter too.
#pragma once

#include <chrono>
#include <vector>

#include "common/status.h"
#include "common/wire/transport.h"

namespace pstrain {
namespace wire {

// Which of the polled sockets have something for Receive (a message, or handshake events that
// Receive reads and logs, answering a timeout when nothing else came).
struct PollResult {
  bool server = false;
  std::vector<size_t> connections;  // indices into the polled connections, in order
  bool any() const { return server || !connections.empty(); }
};

// Waits up to `timeout` until `server` (may be null) or one of `connections` (none null) has
// something to receive. A timeout is an empty result, not an error; Unavailable when zmq_poll
// fails.
Result<PollResult> Poll(ServerSocket* server, const std::vector<Connection*>& connections,
                        std::chrono::milliseconds timeout);

}  // namespace wire
}  // namespace pstrain
