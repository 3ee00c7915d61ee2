#include "common/wire/poller.h"

#include <zmq.h>

#include <algorithm>
#include <cerrno>

namespace pstrain {
namespace wire {

Result<PollResult> Poll(ServerSocket* server, const std::vector<Connection*>& connections,
                        std::chrono::milliseconds timeout) {
  std::vector<zmq_pollitem_t> items;
  std::vector<size_t> owner;  // per item: 0 for the server, i + 1 for connections[i]
  const auto add = [&](const std::vector<void*>& handles, size_t who) {
    for (void* h : handles) {
      items.push_back({h, 0, ZMQ_POLLIN, 0});
      owner.push_back(who);
    }
  };
  if (server != nullptr) add(server->PollHandles(), 0);
  for (size_t i = 0; i < connections.size(); ++i) add(connections[i]->PollHandles(), i + 1);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  PollResult result;
  while (true) {
    // Rounded up: a wait of under a millisecond left is a millisecond, not a poll that returns
    // at once (the serving loop would spin until its deadline).
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    for (auto& item : items) item.revents = 0;
    const int rc =
        zmq_poll(items.data(), static_cast<int>(items.size()), std::max<int64_t>(left.count(), 0));
    if (rc == 0) return result;
    if (rc < 0) {
      if (zmq_errno() == EINTR) continue;
      return Unavailable(std::string("zmq_poll failed: ") + zmq_strerror(zmq_errno()));
    }
    break;
  }
  for (size_t k = 0; k < items.size(); ++k) {
    if (!(items[k].revents & ZMQ_POLLIN)) continue;
    if (owner[k] == 0) {
      result.server = true;
    } else if (result.connections.empty() || result.connections.back() != owner[k] - 1) {
      result.connections.push_back(owner[k] - 1);
    }
  }
  return result;
}

}  // namespace wire
}  // namespace pstrain
