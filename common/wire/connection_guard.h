// What one peer's connection may make a server hold before its message is delivered.
// ZeroMQ's queue limit counts whole messages and its size limit single frames: the frames of a
// message still arriving stay in ZeroMQ, out of the application's sight, until the last one, so
// a peer that never finishes a message could grow the server without bound. The kernel counts
// each TCP connection's received bytes, and every message ZeroMQ hands over names the
// descriptor it came from; what the kernel passed to ZeroMQ minus the exact ZMTP size of the
// messages delivered from that descriptor is what ZeroMQ holds for the connection. When the
// socket has no finished message waiting, that is at most one unfinished message: a connection
// holding more than the largest message its peer may send is cut (shutdown(2) of its descriptor,
// after which ZeroMQ drops the connection and frees its frames), and so is one holding more than
// a full receive queue of them at any time, or more than one message while two rounds of the
// others' messages are delivered and none of its own.
// How large a message may be follows from who sends it (SetMessageBounds; a parameter server
// derives both sizes from its config, ps/message_bound.h): a server's key (ps-<t>) may send
// replica copies, every other key only what its role sends. A connection is known by the key
// name its delivered messages carry; until one came whole, it gets a server's bound only if a
// server key was let in from its host (its copy may be its first message), and in plaintext,
// where no key names anyone, every connection gets a server's bound. Same-host Unix (ipc://)
// sockets are guarded alike: the kernel keeps no count of a Unix connection's bytes, so the
// process keeps its own (unix_read_count.h). Inside the wire library; what it judges comes from
// the counters it is given, so that tests drive it directly.
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

// What a guarded socket speaks, which sets the framing the guard counts and whether a delivered
// message names its sender's key: plaintext TCP or ipc (no key), CURVE over TCP, or PLAIN
// with a same-host proof over ipc (same_host.h: each message names its key, framed as plaintext).
enum class Link { kPlaintext = 0, kCurve = 1, kSameHost = 2 };

// Whose bound a connection gets: a server's key sends replica copies, larger than what any
// other role sends.
enum class PeerKind { kClient = 0, kServer = 1 };

class ConnectionGuard {
 public:
  // Bytes the kernel has passed to ZeroMQ from `fd` so far (received minus still unread), or
  // nullopt when `fd` is no open TCP socket.
  using BytesRead = std::function<std::optional<uint64_t>(int fd)>;
  // Whether the connection `fd`, none of whose messages came whole yet, may hold a server's key
  // (one was let in from its host).
  using MayBeServer = std::function<bool(int fd)>;

  // `queued_messages`: how many whole messages the socket may buffer per peer. `link`: what the
  // connections speak. Until SetMessageBounds, every peer may send a message of the limits'
  // max_total_bytes.
  ConnectionGuard(const MessageLimits& limits, int queued_messages, Link link,
                  BytesRead bytes_read = KernelBytesRead, MayBeServer may_be_server = nullptr);

  // The largest message (its frames' bytes) a server's key and any other key may send, each at
  // most the limits' max_total_bytes.
  void SetMessageBounds(uint64_t client_bytes, uint64_t server_bytes);
  // Whether `identity` names a parameter server's key ("ps-0").
  static bool IsServerKey(const std::string& identity);

  // ZMTP's size on the wire of one frame of `size` bytes (what the kernel counted for it).
  static uint64_t WireBytes(size_t frame_size, bool curve);
  // The kernel's count for a TCP socket (TCP_INFO's bytes received minus SIOCINQ).
  static std::optional<uint64_t> KernelBytesRead(int fd);
  // Shuts connection `fd` down and returns its peer's address ("10.0.0.7:51234"). Never
  // close(): the descriptor is ZeroMQ's, which then reads the end of the stream, drops the
  // connection and frees what it held of it.
  static std::string Cut(int fd);
  // The peer's address of connection `fd` ("10.0.0.7:51234"; a Unix socket's peer process
  // "localhost:<pid>"; "?:0" when unknown).
  static std::string PeerAddress(int fd);

  void Opened(int fd);
  void Closed(int fd);
  // A whole message came from `fd`, `wire_bytes` long on the wire; `identity` as in Incoming.
  void Delivered(int fd, uint64_t wire_bytes, const std::string& identity);

  // The connections over their bound. `drained` is asked after the kernel's counters are read:
  // whether the socket had no finished message waiting, so that what a connection holds is at
  // most its unfinished one. Each connection is reported once; the caller cuts it.
  std::vector<OverfullConnection> Check(const std::function<bool()>& drained);

  size_t connections() const { return connections_.size(); }
  uint64_t unfinished_bound(PeerKind kind = PeerKind::kClient) const {
    return bounds_[static_cast<int>(kind)].unfinished;
  }
  uint64_t queued_bound(PeerKind kind = PeerKind::kClient) const {
    return bounds_[static_cast<int>(kind)].queued;
  }

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
  struct Bounds {
    uint64_t unfinished = 0;  // one message, as the kernel counts it, and the slack
    uint64_t queued = 0;      // a full queue of them and the next one's first frame
  };
  Bounds BoundsFor(uint64_t message_bytes) const;
  // The kind `entry` on `fd` is judged as, holding `held` bytes.
  PeerKind KindOf(int fd, const Entry& entry, uint64_t held) const;
  bool Stuck(Entry* entry, uint64_t held, uint64_t unfinished_bound);

  std::unordered_map<int, Entry> connections_;
  uint64_t messages_ = 0;  // delivered from every connection
  uint64_t closed_ = 0;
  BytesRead bytes_read_;
  MayBeServer may_be_server_;
  MessageLimits limits_;
  int queued_messages_;
  Link link_;
  Bounds bounds_[2];  // by PeerKind
};

}  // namespace wire
}  // namespace pstrain
