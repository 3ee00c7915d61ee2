#include "common/wire/connection_guard.h"

#include <arpa/inet.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <utility>

namespace pstrain {
namespace wire {
namespace {

// ZMTP 3: a flags byte, then the body's size in one byte (up to 255) or eight.
uint64_t Framed(uint64_t body) { return body + (body > 255 ? 9 : 2); }
// A CURVE MESSAGE command around each frame: "\x07MESSAGE", an 8-byte nonce, the 16-byte
// authenticator and the encrypted flags byte.
constexpr uint64_t kCurveMessageBytes = 8 + 8 + 16 + 1;
// The greeting and handshake before the first message, and what ZeroMQ has read from the kernel
// ahead of its decoder (8 KiB batches): counted by the kernel, never delivered.
constexpr uint64_t kConnectionSlack = 64 << 10;

}  // namespace

uint64_t ConnectionGuard::WireBytes(size_t frame_size, bool curve) {
  return Framed(frame_size + (curve ? kCurveMessageBytes : 0));
}

std::optional<uint64_t> ConnectionGuard::KernelBytesRead(int fd) {
  tcp_info info{};
  socklen_t size = sizeof(info);
  int unread = 0;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &size) != 0 ||
      size < offsetof(tcp_info, tcpi_bytes_received) + sizeof(info.tcpi_bytes_received) ||
      ioctl(fd, SIOCINQ, &unread) != 0 || unread < 0 ||
      info.tcpi_bytes_received < static_cast<uint64_t>(unread)) {
    return std::nullopt;
  }
  return info.tcpi_bytes_received - static_cast<uint64_t>(unread);
}

std::string ConnectionGuard::PeerAddress(int fd) {
  sockaddr_storage addr{};
  socklen_t size = sizeof(addr);
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &size) == 0) {
    if (addr.ss_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
      inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
      port = ntohs(in->sin_port);
    } else if (addr.ss_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
      inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
      port = ntohs(in6->sin6_port);
    } else if (addr.ss_family == AF_UNIX) {
      ucred peer{};
      socklen_t peer_size = sizeof(peer);
      snprintf(host, sizeof(host), "localhost");
      if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &peer_size) == 0) port = peer.pid;
    }
  }
  return std::string(host) + ":" + std::to_string(port);
}

std::string ConnectionGuard::Cut(int fd) {
  std::string peer = PeerAddress(fd);
  shutdown(fd, SHUT_RDWR);
  return peer;
}

bool ConnectionGuard::IsServerKey(const std::string& identity) {
  return identity.rfind("ps-", 0) == 0;
}

ConnectionGuard::ConnectionGuard(const MessageLimits& limits, int queued_messages, Link link,
                                 BytesRead bytes_read, MayBeServer may_be_server)
    : bytes_read_(std::move(bytes_read)),
      may_be_server_(std::move(may_be_server)),
      limits_(limits),
      queued_messages_(queued_messages),
      link_(link) {
  SetMessageBounds(limits.max_total_bytes, limits.max_total_bytes);
}

void ConnectionGuard::SetMessageBounds(uint64_t client_bytes, uint64_t server_bytes) {
  const uint64_t most = limits_.max_total_bytes;
  bounds_[static_cast<int>(PeerKind::kClient)] = BoundsFor(std::min(client_bytes, most));
  bounds_[static_cast<int>(PeerKind::kServer)] = BoundsFor(std::min(server_bytes, most));
}

ConnectionGuard::Bounds ConnectionGuard::BoundsFor(uint64_t message_bytes) const {
  // The largest message, as the kernel counts it: its bytes plus the framing of every frame the
  // limits allow.
  const uint64_t message = message_bytes +
                           limits_.max_frames * WireBytes(0, link_ == Link::kCurve) +
                           limits_.max_frames * 7;  // each frame's size in eight bytes
  Bounds b;
  b.unfinished = message + kConnectionSlack;
  // A full queue of finished messages and the first frame of the next (which ZeroMQ decodes
  // before it finds the queue full).
  b.queued = static_cast<uint64_t>(queued_messages_ + 1) * message + kConnectionSlack;
  return b;
}

PeerKind ConnectionGuard::KindOf(int fd, const Entry& entry, uint64_t held) const {
  if (!entry.identity.empty()) {
    return IsServerKey(entry.identity) ? PeerKind::kServer : PeerKind::kClient;
  }
  if (link_ == Link::kPlaintext) return PeerKind::kServer;  // no key names anyone
  // Asked only of a connection a client may not hold so much on.
  if (held <= unfinished_bound(PeerKind::kClient)) return PeerKind::kClient;
  return may_be_server_ && may_be_server_(fd) ? PeerKind::kServer : PeerKind::kClient;
}

void ConnectionGuard::Opened(int fd) { connections_[fd] = Entry{}; }

void ConnectionGuard::Closed(int fd) {
  connections_.erase(fd);
  ++closed_;
}

void ConnectionGuard::Delivered(int fd, uint64_t wire_bytes, const std::string& identity) {
  ++messages_;
  // A message whose connection's opening is not read yet: the opening comes first on the
  // monitor, which the socket reads before taking messages, so this is a connection already
  // closed whose last messages are being taken. Nothing to guard.
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  it->second.delivered += wire_bytes;
  if (!identity.empty() && it->second.identity != identity) it->second.identity = identity;
}

std::vector<OverfullConnection> ConnectionGuard::Check(const std::function<bool()>& drained) {
  std::vector<std::pair<int, uint64_t>> held;
  held.reserve(connections_.size());
  for (auto& [fd, entry] : connections_) {
    if (entry.reported) continue;
    const std::optional<uint64_t> read = bytes_read_(fd);
    if (!read.has_value() || *read <= entry.delivered) continue;
    held.emplace_back(fd, *read - entry.delivered);
  }
  std::vector<OverfullConnection> overfull;
  if (held.empty()) return overfull;
  // Only once the counters are read: a message finished after them is then still waiting.
  const bool nothing_waits = drained();
  for (const auto& [fd, bytes] : held) {
    Entry& entry = connections_[fd];
    const Bounds& b = bounds_[static_cast<int>(KindOf(fd, entry, bytes))];
    const uint64_t bound = nothing_waits ? b.unfinished : b.queued;
    if (bytes > bound || Stuck(&entry, bytes, b.unfinished)) {
      entry.reported = true;
      overfull.push_back({fd, entry.identity, bytes, bytes > bound ? bound : b.unfinished});
    }
  }
  return overfull;
}

// While finished messages wait, a connection over one message is watched from that look on.
// ZeroMQ serves its peers' connections in turn, one whole message each, and the socket's
// readiness check before every read makes a connection with a finished message take its turn:
// so once the socket has delivered two rounds of messages and none came from this connection,
// what it held at the first look was one message it had not finished.
bool ConnectionGuard::Stuck(Entry* entry, uint64_t held, uint64_t unfinished_bound) {
  if (held <= unfinished_bound) {
    entry->watched = false;
    return false;
  }
  if (!entry->watched || entry->delivered != entry->delivered_when_watched) {
    entry->watched = true;
    entry->delivered_when_watched = entry->delivered;
    entry->messages_when_watched = messages_;
    entry->closed_when_watched = closed_;
    return false;
  }
  // Connections closed meanwhile may still have had finished messages waiting: more turns.
  const uint64_t turns = connections_.size() + (closed_ - entry->closed_when_watched);
  return messages_ - entry->messages_when_watched >= 2 * turns + 2;
}

}  // namespace wire
}  // namespace pstrain
