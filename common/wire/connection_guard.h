// What one peer's TCP connection may make a server hold before its message is delivered.
// ZeroMQ's queue limit counts whole messages and its size limit single frames: the frames of a
// message still arriving stay in ZeroMQ, out of the application's sight, until the last one, so
// a peer that never finishes a message could grow the server without bound. The kernel counts
// each TCP connection's received bytes, and every message ZeroMQ hands over names the
// descriptor it came from; what the kernel passed to ZeroMQ minus the exact ZMTP size of the
// messages delivered from that descriptor is what ZeroMQ holds for the connection. When the
// socket has no finished message waiting, that is at most one unfinished message: a connection
// holding more than the largest message allowed is cut (shutdown(2) of its descriptor, after
// which ZeroMQ drops the connection and frees its frames), and so is one holding more than a
// full receive queue of them at any time, or more than one message while two rounds of the
// others' messages are delivered and none of its own. Unix (ipc://) sockets count no bytes and are
// not guarded: only processes of the server's own user can reach them (same_host.h), and those can
// stop the server anyway. Inside the wire library; what it judges comes from the
// counters it is given, so that tests drive it directly.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/wire/message.h"

namespace pstrain {
namespace wire {

// A connection the guard found holding more than it may.
struct OverfullConnection {
  int fd = -1;
  std::string identity;  // the key name its messages carried ("worker-1"); "" if none came
  uint64_t held_bytes = 0;
  uint64_t bound_bytes = 0;
};

class ConnectionGuard {
 public:
  // Bytes the kernel has passed to ZeroMQ from `fd` so far (received minus still unread), or
  // nullopt when `fd` is no open TCP socket.
  using BytesRead = std::function<std::optional<uint64_t>(int fd)>;

  // `queued_messages`: how many whole messages the socket may buffer per peer. `curve`: whether
  // the connections speak CURVE (its framing is larger).
  ConnectionGuard(const MessageLimits& limits, int queued_messages, bool curve,
                  BytesRead bytes_read = KernelBytesRead);

  // ZMTP's size on the wire of one frame of `size` bytes (what the kernel counted for it).
  static uint64_t WireBytes(size_t frame_size, bool curve);
  // The kernel's count for a TCP socket (TCP_INFO's bytes received minus SIOCINQ).
  static std::optional<uint64_t> KernelBytesRead(int fd);
  // Shuts connection `fd` down and returns its peer's address ("10.0.0.7:51234"). Never
  // close(): the descriptor is ZeroMQ's, which then reads the end of the stream, drops the
  // connection and frees what it held of it.
  static std::string Cut(int fd);

  void Opened(int fd);
  void Closed(int fd);
  // A whole message came from `fd`, `wire_bytes` long on the wire; `identity` as in Incoming.
  void Delivered(int fd, uint64_t wire_bytes, const std::string& identity);

  // The connections over their bound. `drained` is asked after the kernel's counters are read:
  // whether the socket had no finished message waiting, so that what a connection holds is at
  // most its unfinished one. Each connection is reported once; the caller cuts it.
  std::vector<OverfullConnection> Check(const std::function<bool()>& drained);

  size_t connections() const { return connections_.size(); }
  uint64_t unfinished_bound() const { return unfinished_bound_; }
  uint64_t queued_bound() const { return queued_bound_; }

 private:
  struct Entry {
    uint64_t delivered = 0;
    std::string identity;
    bool reported = false;
    // Over one message at a look while finished messages waited: what was delivered from it and
    // from every connection then.
    bool watched = false;
    uint64_t delivered_when_watched = 0;
    uint64_t messages_when_watched = 0;
    uint64_t closed_when_watched = 0;
  };
  bool Stuck(Entry* entry, uint64_t held);

  std::unordered_map<int, Entry> connections_;
  uint64_t messages_ = 0;  // delivered from every connection
  uint64_t closed_ = 0;
  BytesRead bytes_read_;
  uint64_t unfinished_bound_;
  uint64_t queued_bound_;
};

}  // namespace wire
}  // namespace pstrain
