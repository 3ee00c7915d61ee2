#include "common/wire/transport.h"

#include <glog/logging.h>
#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <ctime>
#include <utility>
#include <vector>

#include "common/wire/codec.h"
#include "common/wire/connection_guard.h"
#include "common/wire/handshake_monitor.h"
#include "common/wire/same_host_proof.h"
#include "common/wire/unix_read_count.h"
#include "common/wire/zap_handler.h"
#include "common/wire/zmq_context.h"

namespace pstrain {
namespace wire {
namespace {

// Outgoing messages a socket queues per peer before Send blocks, and incoming ones it buffers.
constexpr int kHighWaterMark = 100;
// How long close() keeps trying to deliver queued messages (e.g. a shutdown reply).
constexpr int kLingerMs = 500;
// A peer that stops reading must not block a sender forever.
constexpr int kSendTimeoutMs = 60000;
// A server buffers at most this many received messages per peer; beyond them ZeroMQ stops
// reading that peer's connection (TCP pushes back), so one peer's memory on a server is at most
// this many messages of the size limits (MessageLimits). Clients have a push, a pull and a retry
// of each in flight at most.
constexpr int kServerReceiveQueue = 8;
// An unauthenticated connection that does not finish its handshake is closed after this long.
constexpr int kHandshakeMs = 10000;
// Two I/O threads unless SetIoThreads says otherwise, so that sending and receiving large
// tensors in one process overlap.
std::atomic<int> io_threads{2};
std::atomic<bool> context_made{false};
// ZMQ_ZAP_ENFORCE_DOMAIN, a draft option of libzmq 4.3 (Debian's build has it): a CURVE server
// then refuses every client if the ZAP handler were missing, instead of letting all in.
constexpr int kZapEnforceDomain = 93;

std::atomic<int64_t> frames_held{0};

std::string ZmqError(const std::string& what, const std::string& endpoint) {
  return what + " on " + endpoint + ": " + zmq_strerror(zmq_errno());
}

void CloseSocket(void* socket) {
  if (socket != nullptr) zmq_close(socket);
}

// A socket of `type` with the options both ends share.
Result<void*> NewSocket(int type, const MessageLimits& limits, const std::string& endpoint) {
  void* socket = zmq_socket(ZmqContext(), type);
  if (socket == nullptr) return Unavailable(ZmqError("zmq_socket", endpoint));
  // ZeroMQ drops a frame above this size (and the connection that sent it) before buffering
  // it whole; the codec checks the exact limits per frame kind.
  const int64_t max_frame = static_cast<int64_t>(std::min<size_t>(
      std::max(limits.max_header_bytes, limits.max_tensor_bytes), static_cast<size_t>(INT64_MAX)));
  const int hwm = kHighWaterMark;
  const int linger = kLingerMs;
  const int send_timeout = kSendTimeoutMs;
  if (zmq_setsockopt(socket, ZMQ_MAXMSGSIZE, &max_frame, sizeof(max_frame)) != 0 ||
      zmq_setsockopt(socket, ZMQ_SNDHWM, &hwm, sizeof(hwm)) != 0 ||
      zmq_setsockopt(socket, ZMQ_RCVHWM, &hwm, sizeof(hwm)) != 0 ||
      zmq_setsockopt(socket, ZMQ_LINGER, &linger, sizeof(linger)) != 0 ||
      zmq_setsockopt(socket, ZMQ_SNDTIMEO, &send_timeout, sizeof(send_timeout)) != 0) {
    Status error = Unavailable(ZmqError("zmq_setsockopt", endpoint));
    CloseSocket(socket);
    return error;
  }
  return socket;
}

bool IsSameHost(const std::string& endpoint) { return endpoint.rfind("ipc://", 0) == 0; }

// Sets the options of `security` (nothing for plaintext); `zap_domain` for servers. Over TCP:
// CURVE. Over a same-host ipc:// socket (same_host.h): PLAIN, the client's key name and a proof
// made with its secret key (same_host_proof.h), checked by the server's ZAP handler.
Status ApplySecurity(void* socket, const Security& security, const std::string& zap_domain,
                     const std::string& endpoint) {
  if (!security.curve()) return Status::OK();
  const bool server = !zap_domain.empty();
  const auto set = [&](int option, const std::string& value, const char* what) -> Status {
    if (zmq_setsockopt(socket, option, value.data(), value.size()) == 0) return Status::OK();
    return InvalidArgument(
        std::string(what) + " for " + endpoint +
        (IsSameHost(endpoint) ? " is refused by ZeroMQ (" : " is not a CURVE key (") +
        zmq_strerror(zmq_errno()) + ")");
  };
  const int one = 1;
  if (IsSameHost(endpoint) && !server) {
    if (security.own_name.empty()) {
      return InvalidArgument("a same-host client of " + endpoint + " needs its key's name");
    }
    if (security.server_key.empty()) {
      return InvalidArgument("a same-host client of " + endpoint +
                             " needs the server's public key");
    }
    ASSIGN_OR_RETURN(std::string proof, SameHostProof(security.own.secret_key, security.server_key,
                                                      security.own_name));
    RETURN_IF_ERROR(set(ZMQ_PLAIN_USERNAME, security.own_name, "the key's name"));
    return set(ZMQ_PLAIN_PASSWORD, proof, "the same-host proof");
  }
  if (!IsSameHost(endpoint)) {
    RETURN_IF_ERROR(set(ZMQ_CURVE_PUBLICKEY, security.own.public_key, "the public key"));
    RETURN_IF_ERROR(set(ZMQ_CURVE_SECRETKEY, security.own.secret_key, "the secret key"));
  }
  if (!server) {
    if (security.server_key.empty()) {
      return InvalidArgument("a CURVE client of " + endpoint + " needs the server's public key");
    }
    return set(ZMQ_CURVE_SERVERKEY, security.server_key, "the server's public key");
  }
  const int mechanism = IsSameHost(endpoint) ? ZMQ_PLAIN_SERVER : ZMQ_CURVE_SERVER;
  if (zmq_setsockopt(socket, mechanism, &one, sizeof(one)) != 0 ||
      zmq_setsockopt(socket, ZMQ_ZAP_DOMAIN, zap_domain.data(), zap_domain.size()) != 0) {
    return Unavailable(ZmqError("zmq_setsockopt (authenticating server)", endpoint));
  }
  zmq_setsockopt(socket, kZapEnforceDomain, &one, sizeof(one));  // best effort: a draft option
  return Status::OK();
}

// Frees a sent tensor frame: the owner (a Tensor, or a bfloat16 copy) that kept its bytes alive
// while ZeroMQ (on its I/O thread) was writing them.
void ReleaseSentTensor(void* /*data*/, void* hint) {
  delete static_cast<std::shared_ptr<const void>*>(hint);
}
void ReleaseSentHeader(void* /*data*/, void* hint) { delete static_cast<std::string*>(hint); }

// Why a part could not be sent. `routed`: a server's reply (its failure drops the reply); else a
// client's message, which a full queue leaves unsent (ResourceExhausted) when it may not wait.
Status SendFailed(zmq_msg_t* msg, bool never_block, bool routed, const std::string& endpoint) {
  Status error =
      zmq_errno() == EAGAIN && never_block && !routed
          ? ResourceExhausted(endpoint + " has " + std::to_string(kHighWaterMark) +
                              " messages queued that it has not taken: not sent")
      : zmq_errno() == EAGAIN && never_block
          ? Unavailable("a peer of " + endpoint + " has " + std::to_string(kHighWaterMark) +
                        " replies queued that it does not read: reply dropped")
      : zmq_errno() == EAGAIN
          ? Unavailable("send to " + endpoint + " timed out after " +
                        std::to_string(kSendTimeoutMs) + " ms (peer not reading?)")
      : zmq_errno() == EHOSTUNREACH ? Unavailable("peer of " + endpoint + " is gone (disconnected)")
                                    : Unavailable(ZmqError("zmq_msg_send", endpoint));
  zmq_msg_close(msg);  // on failure the message is still ours (runs its free function)
  return error;
}

Status SendPart(void* socket, zmq_msg_t* msg, bool more, bool never_block, bool routed,
                const std::string& endpoint) {
  const int flags = (more ? ZMQ_SNDMORE : 0) | (never_block ? ZMQ_DONTWAIT : 0);
  // Interrupted by a signal: nothing was sent and the message is still ours; send it again.
  while (zmq_msg_send(msg, socket, flags) < 0) {
    if (zmq_errno() == EINTR) continue;
    return SendFailed(msg, never_block, routed, endpoint);
  }
  return Status::OK();
}

// Sends `message` as [peer,] header, tensors...; tensor frames are the tensors' own buffers.
// A server's reply (`peer` set) never blocks: ZeroMQ admits or refuses a whole message at its
// first frame, so a peer whose queue is full loses this reply and the serving thread goes on.
// A client's message waits for room unless `never_block` (then ResourceExhausted, nothing sent).
Status SendMessage(void* socket, const std::string* peer, const Message& message,
                   const std::string& endpoint, bool never_block = false) {
  ASSIGN_OR_RETURN(EncodedMessage encoded, Encode(message));
  const bool routed = peer != nullptr;
  zmq_msg_t msg;
  if (routed) {
    zmq_msg_init_size(&msg, peer->size());
    std::copy(peer->begin(), peer->end(), static_cast<char*>(zmq_msg_data(&msg)));
    RETURN_IF_ERROR(SendPart(socket, &msg, true, /*never_block=*/true, routed, endpoint));
  }
  auto* header = new std::string(std::move(encoded.header));
  zmq_msg_init_data(&msg, header->data(), header->size(), ReleaseSentHeader, header);
  RETURN_IF_ERROR(SendPart(socket, &msg, !encoded.tensor_frames.empty(), never_block && !routed,
                           routed, endpoint));
  for (size_t i = 0; i < encoded.tensor_frames.size(); ++i) {
    const Frame& f = encoded.tensor_frames[i];
    if (f.size == 0) {
      zmq_msg_init(&msg);
    } else {
      auto* keep = new std::shared_ptr<const void>(f.owner);
      zmq_msg_init_data(&msg, const_cast<void*>(f.data), f.size, ReleaseSentTensor, keep);
    }
    RETURN_IF_ERROR(
        SendPart(socket, &msg, i + 1 < encoded.tensor_frames.size(), false, routed, endpoint));
  }
  return Status::OK();
}

// Waits until `deadline` for `socket` to become readable; Unavailable("timeout after <timeout>
// ms <what>") if it did not. Handshake events are read meanwhile: a server logs refused
// clients, a client stops at once with the error if its server refused it.
Status WaitReadable(void* socket, HandshakeMonitor* monitor,
                    std::chrono::steady_clock::time_point deadline,
                    std::chrono::milliseconds timeout, const std::string& what) {
  RETURN_IF_ERROR(monitor->ReadEvents());
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    zmq_pollitem_t items[] = {{socket, 0, ZMQ_POLLIN, 0}, {monitor->events(), 0, ZMQ_POLLIN, 0}};
    const int rc = zmq_poll(items, 2, std::max<int64_t>(left.count(), 0));
    if (rc > 0 && (items[0].revents & ZMQ_POLLIN)) return Status::OK();
    if (rc > 0) {
      RETURN_IF_ERROR(monitor->ReadEvents());
      continue;
    }
    if (rc == 0) {
      return Unavailable("timeout after " + std::to_string(timeout.count()) + " ms " + what +
                         monitor->Hint());
    }
    if (zmq_errno() != EINTR) {
      return Unavailable("zmq_poll failed " + what + ": " + zmq_strerror(zmq_errno()));
    }
  }
}

std::chrono::steady_clock::time_point DeadlineAfter(std::chrono::milliseconds timeout) {
  return std::chrono::steady_clock::now() + std::max(timeout, std::chrono::milliseconds(0));
}

// A received frame that stays alive (and counted) while a decoded tensor points into it.
std::shared_ptr<zmq_msg_t> NewFrame() {
  auto* msg = new zmq_msg_t;
  zmq_msg_init(msg);
  frames_held.fetch_add(1, std::memory_order_relaxed);
  return std::shared_ptr<zmq_msg_t>(msg, [](zmq_msg_t* m) {
    zmq_msg_close(m);
    delete m;
    frames_held.fetch_sub(1, std::memory_order_relaxed);
  });
}

struct ReceivedFrames {
  std::string peer;      // the routing id a ROUTER socket puts first
  std::string identity;  // the connection's authenticated name (ZAP User-Id); empty: plaintext
  std::vector<std::shared_ptr<zmq_msg_t>> msgs;
  Status status;            // why the frames were dropped, if they were
  int fd = -1;              // the descriptor the message came in on (ZMQ_SRCFD)
  uint64_t wire_bytes = 0;  // its size on the wire: every frame, kept or dropped, as framed
};

// Reads all parts of the next message (ZeroMQ delivers them together); with `routed`, the first
// part is the sender's routing id. Parts beyond the frame count or total size limits are read
// and dropped at once instead of being kept. `curve`: how the frames were framed on the wire.
Result<ReceivedFrames> ReadParts(void* socket, bool routed, const MessageLimits& limits,
                                 const std::string& endpoint, bool curve = false) {
  ReceivedFrames r;
  size_t count = 0;
  size_t total_bytes = 0;
  bool first = true;
  bool more = true;
  while (more) {
    std::shared_ptr<zmq_msg_t> msg = NewFrame();
    if (zmq_msg_recv(msg.get(), socket, ZMQ_DONTWAIT) < 0) {
      if (zmq_errno() == EINTR) continue;
      if (first) return Unavailable(ZmqError("zmq_msg_recv", endpoint));
      return Internal(ZmqError("zmq_msg_recv in the middle of a message", endpoint));
    }
    more = zmq_msg_more(msg.get()) != 0;
    if (first && routed) {
      r.peer.assign(static_cast<const char*>(zmq_msg_data(msg.get())), zmq_msg_size(msg.get()));
      first = false;
      continue;
    }
    if (routed && count == 0) {
      // Set by the ZAP handler for this connection's key; a peer cannot write it.
      const char* user_id = zmq_msg_gets(msg.get(), "User-Id");
      if (user_id != nullptr) r.identity = user_id;
      r.fd = zmq_msg_get(msg.get(), ZMQ_SRCFD);
    }
    first = false;
    ++count;
    total_bytes += zmq_msg_size(msg.get());
    r.wire_bytes += ConnectionGuard::WireBytes(zmq_msg_size(msg.get()), curve);
    if (count > limits.max_frames || total_bytes > limits.max_total_bytes) {
      // Over a limit: keep nothing but the header (for the request id of the error reply), and
      // read on to the end of the message.
      r.msgs.resize(std::min<size_t>(r.msgs.size(), 1));
    } else if (r.msgs.size() + 1 == count) {
      r.msgs.push_back(std::move(msg));
    }
  }
  r.status = CheckFrameCount(count, limits);
  if (r.status.ok()) r.status = CheckTotalBytes(total_bytes, limits);
  return r;
}

std::vector<Frame> AsFrames(const std::vector<std::shared_ptr<zmq_msg_t>>& msgs) {
  std::vector<Frame> frames;
  frames.reserve(msgs.size());
  for (size_t i = 0; i < msgs.size(); ++i) {
    zmq_msg_t* m = msgs[i].get();
    frames.push_back({zmq_msg_data(m), zmq_msg_size(m), msgs[i]});
  }
  return frames;
}

}  // namespace

void* ZmqContext() {
  static void* context = [] {
    context_made = true;
    void* ctx = zmq_ctx_new();
    CHECK(ctx != nullptr) << "zmq_ctx_new: " << zmq_strerror(errno);
    zmq_ctx_set(ctx, ZMQ_IO_THREADS, io_threads.load());
    return ctx;
  }();
  return context;
}

Status SetIoThreads(int threads) {
  if (threads < 1 || threads > 16) {
    return InvalidArgument("ZeroMQ I/O threads must be 1 to 16, got " + std::to_string(threads));
  }
  if (context_made) {
    return FailedPrecondition("ZeroMQ's I/O threads are set before the first socket; " +
                              std::to_string(io_threads.load()) + " already run");
  }
  io_threads = threads;
  return Status::OK();
}

int64_t ReceivedFramesHeld() { return frames_held.load(std::memory_order_relaxed); }

std::string TcpEndpoint(const std::string& host_port) {
  if (host_port.find("://") != std::string::npos) return host_port;
  return "tcp://" + host_port;
}

// ServerSocket ----------------------------------------------------------------------------------

namespace {

// One bound ROUTER socket of a server: its TCP endpoint, or its same-host ipc:// one.
struct Listener {
  std::unique_ptr<ZapDomain> zap;  // with keys; outlives the socket, so no client slips in
  void* socket = nullptr;
  std::unique_ptr<ConnectionGuard> guard;  // fed by the monitor, so it outlives it
  std::unique_ptr<HandshakeMonitor> monitor;
  std::string endpoint;
  bool curve = false;
  ~Listener() {
    monitor.reset();  // stops monitoring, which needs the socket
    CloseSocket(socket);
  }
};

Result<std::unique_ptr<Listener>> Listen(const std::string& endpoint, const MessageLimits& limits,
                                         const Security& security) {
  auto l = std::make_unique<Listener>();
  if (security.curve()) {
    if (security.client_keys.empty()) {
      return InvalidArgument("a CURVE server on " + endpoint + " needs its clients' public keys");
    }
    ASSIGN_OR_RETURN(l->zap,
                     ZapDomain::Register(security.client_keys,
                                         IsSameHost(endpoint) ? ZapDomain::Proof::kSameHostProof
                                                              : ZapDomain::Proof::kCurve,
                                         security.own.secret_key));
  }
  ASSIGN_OR_RETURN(l->socket, NewSocket(ZMQ_ROUTER, limits, endpoint));
  RETURN_IF_ERROR(ApplySecurity(l->socket, security, l->zap ? l->zap->name() : "", endpoint));
  l->curve = security.curve() && !IsSameHost(endpoint);
  // Before any of its messages came whole, a connection from where a server's key came in from
  // may be that server's, whose first message may be a replica copy.
  ConnectionGuard::MayBeServer may_be_server;
  if (l->zap) {
    may_be_server = [zap = l->zap.get()](int fd) {
      for (const std::string& name : zap->AdmittedFrom(ZapDomain::AddressOf(fd))) {
        if (ConnectionGuard::IsServerKey(name)) return true;
      }
      return false;
    };
  }
  const Link link = !security.curve()      ? Link::kPlaintext
                    : IsSameHost(endpoint) ? Link::kSameHost
                                           : Link::kCurve;
  l->guard = std::make_unique<ConnectionGuard>(
      limits, kServerReceiveQueue, link,
      IsSameHost(endpoint) ? ConnectionGuard::BytesRead(UnixBytesRead)
                           : ConnectionGuard::BytesRead(ConnectionGuard::KernelBytesRead),
      std::move(may_be_server));
  HandshakeMonitor::ConnectionEvent on_connection = [guard = l->guard.get()](int fd, bool opened) {
    opened ? guard->Opened(fd) : guard->Closed(fd);
  };
  ASSIGN_OR_RETURN(l->monitor, HandshakeMonitor::Start(l->socket, HandshakeMonitor::Side::kServer,
                                                       security.curve(), on_connection));
  // A reply to a peer that has gone fails instead of vanishing silently.
  const int mandatory = 1, queue = kServerReceiveQueue, handshake = kHandshakeMs;
  if (zmq_setsockopt(l->socket, ZMQ_ROUTER_MANDATORY, &mandatory, sizeof(mandatory)) != 0 ||
      zmq_setsockopt(l->socket, ZMQ_RCVHWM, &queue, sizeof(queue)) != 0 ||
      zmq_setsockopt(l->socket, ZMQ_HANDSHAKE_IVL, &handshake, sizeof(handshake)) != 0) {
    return Unavailable(ZmqError("zmq_setsockopt (server limits)", endpoint));
  }
  if (zmq_bind(l->socket, endpoint.c_str()) != 0) {
    return Unavailable(ZmqError("cannot bind", endpoint));
  }
  char bound[256] = {0};
  size_t size = sizeof(bound);
  if (zmq_getsockopt(l->socket, ZMQ_LAST_ENDPOINT, bound, &size) != 0) {
    return Unavailable(ZmqError("ZMQ_LAST_ENDPOINT", endpoint));
  }
  l->endpoint = bound;
  l->monitor->set_endpoint(bound);
  if (l->zap) l->zap->set_endpoint(bound);
  return l;
}

// The calling thread's CPU time so far.
std::chrono::nanoseconds ThreadCpuTime() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
}

}  // namespace

struct ServerSocket::Impl {
  // [0] the endpoint Bind was given; then same-host ones. A peer's id is its listener's index
  // (one byte) before ZeroMQ's routing id, so that its reply leaves by the socket it came in on.
  std::vector<std::unique_ptr<Listener>> listeners;
  MessageLimits limits;
  Security security;
  size_t next = 0;  // the listener read first next time: turns, so none starves the others
  std::chrono::steady_clock::time_point next_guard;
  std::chrono::steady_clock::time_point previous_guard;
  // BoundPeerMessages's, for listeners added later; 0: the limits' max_total_bytes.
  uint64_t client_message_bytes = 0;
  uint64_t server_message_bytes = 0;
};

ServerSocket::ServerSocket(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ServerSocket::~ServerSocket() = default;

Result<std::unique_ptr<ServerSocket>> ServerSocket::Bind(const std::string& endpoint,
                                                         const MessageLimits& limits,
                                                         const Security& security) {
  auto impl = std::make_unique<Impl>();
  impl->limits = limits;
  impl->security = security;
  ASSIGN_OR_RETURN(std::unique_ptr<Listener> first, Listen(endpoint, limits, security));
  impl->listeners.push_back(std::move(first));
  return std::unique_ptr<ServerSocket>(new ServerSocket(std::move(impl)));
}

Status ServerSocket::ListenAlsoOn(const std::string& endpoint) {
  if (impl_->listeners.size() >= 255) return ResourceExhausted("too many endpoints");
  ASSIGN_OR_RETURN(std::unique_ptr<Listener> l, Listen(endpoint, impl_->limits, impl_->security));
  impl_->listeners.push_back(std::move(l));
  if (impl_->client_message_bytes > 0) {
    BoundPeerMessages(impl_->client_message_bytes, impl_->server_message_bytes);
  }
  return Status::OK();
}

void ServerSocket::BoundPeerMessages(uint64_t client_bytes, uint64_t server_bytes) {
  impl_->client_message_bytes = client_bytes;
  impl_->server_message_bytes = server_bytes;
  for (const auto& l : impl_->listeners) {
    if (l->guard) l->guard->SetMessageBounds(client_bytes, server_bytes);
  }
}

std::string ServerSocket::endpoint() const { return impl_->listeners[0]->endpoint; }

int64_t ServerSocket::refused_handshakes() const {
  int64_t refused = 0;
  for (const auto& l : impl_->listeners) {
    refused += l->monitor->refused() + (l->zap ? l->zap->refused() : 0);
  }
  return refused;
}

std::vector<void*> ServerSocket::PollHandles() const {
  std::vector<void*> handles;
  for (const auto& l : impl_->listeners) {
    handles.push_back(l->socket);
    handles.push_back(l->monitor->events());
  }
  return handles;
}

std::chrono::steady_clock::time_point ServerSocket::next_guard() const { return impl_->next_guard; }

std::vector<CutConnection> ServerSocket::GuardConnections() {
  // Between looks a peer at loopback speed sends about 10 MB; the looks themselves (two
  // system calls per connection) take at most 2 % of the serving thread.
  constexpr auto kGuardInterval = std::chrono::milliseconds(10);
  constexpr int kIntervalPerCost = 50;
  std::vector<CutConnection> cut;
  const auto start = std::chrono::steady_clock::now();
  if (start < impl_->next_guard) return cut;
  const auto since_previous =
      std::chrono::duration_cast<std::chrono::milliseconds>(start - impl_->previous_guard);
  impl_->previous_guard = start;
  const auto cpu_start = ThreadCpuTime();
  for (const auto& l : impl_->listeners) {
    if (!l->guard) continue;
    (void)l->monitor->ReadEvents();  // a server's returns OK; it learns of new connections
    const auto drained = [&l] {
      int events = 0;
      size_t size = sizeof(events);
      return zmq_getsockopt(l->socket, ZMQ_EVENTS, &events, &size) == 0 &&
             (events & ZMQ_POLLIN) == 0;
    };
    for (const OverfullConnection& o : l->guard->Check(drained)) {
      CutConnection c;
      c.endpoint = l->endpoint;
      const std::string zap_address = ZapDomain::AddressOf(o.fd);
      c.peer = ConnectionGuard::Cut(o.fd);
      c.identity = o.identity;
      c.held_bytes = o.held_bytes;
      c.bound_bytes = o.bound_bytes;
      c.since_previous_look = since_previous;
      if (c.identity.empty() && l->zap) c.keys_from_host = l->zap->AdmittedFrom(zap_address);
      cut.push_back(std::move(c));
    }
  }
  // The look's own CPU time, not the wall clock's: on a loaded host a look the scheduler paused
  // would otherwise stretch the interval fifty-fold, just when the serving thread runs late.
  const auto cost = ThreadCpuTime() - cpu_start;
  impl_->next_guard = start + std::max<std::chrono::steady_clock::duration>(
                                  kGuardInterval, cost * kIntervalPerCost);
  return cut;
}

Result<Incoming> ServerSocket::Receive(std::chrono::milliseconds timeout) {
  const auto deadline = DeadlineAfter(timeout);
  std::vector<std::unique_ptr<Listener>>& listeners = impl_->listeners;
  const size_t n = listeners.size();
  std::vector<zmq_pollitem_t> items;
  for (const auto& l : listeners) {
    RETURN_IF_ERROR(l->monitor->ReadEvents());  // a server's monitor logs refusals
    items.push_back({l->socket, 0, ZMQ_POLLIN, 0});
    items.push_back({l->monitor->events(), 0, ZMQ_POLLIN, 0});
  }
  size_t ready = n;
  while (ready == n) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    for (auto& item : items) item.revents = 0;
    const int rc =
        zmq_poll(items.data(), static_cast<int>(items.size()), std::max<int64_t>(left.count(), 0));
    if (rc == 0) {
      return Unavailable("timeout after " + std::to_string(timeout.count()) +
                         " ms waiting for a message on " + endpoint() +
                         listeners[0]->monitor->Hint());
    }
    if (rc < 0) {
      if (zmq_errno() == EINTR) continue;
      return Unavailable("zmq_poll failed waiting for a message on " + endpoint() + ": " +
                         zmq_strerror(zmq_errno()));
    }
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (impl_->next + k) % n;
      if (items[2 * i + 1].revents & ZMQ_POLLIN)
        RETURN_IF_ERROR(listeners[i]->monitor->ReadEvents());
      if (ready == n && (items[2 * i].revents & ZMQ_POLLIN)) ready = i;
    }
  }
  impl_->next = (ready + 1) % n;
  Listener& l = *listeners[ready];
  ASSIGN_OR_RETURN(ReceivedFrames parts,
                   ReadParts(l.socket, /*routed=*/true, impl_->limits, l.endpoint, l.curve));
  if (l.guard && parts.fd >= 0) l.guard->Delivered(parts.fd, parts.wire_bytes, parts.identity);
  Incoming in;
  in.peer = std::string(1, static_cast<char>(ready)) + parts.peer;
  in.identity = std::move(parts.identity);
  if (!parts.status.ok()) {
    in.message = parts.status;
  } else {
    in.message = Decode(AsFrames(parts.msgs), impl_->limits, "this server", Expect::kRequest);
  }
  // So that a refused message's error reply is matched to its request.
  if (!in.message.ok() && !parts.msgs.empty()) {
    in.request_id = PeekRequestId(AsFrames(parts.msgs)[0], impl_->limits);
  }
  return in;
}

Status ServerSocket::Reply(const std::string& peer, const Message& message) {
  const size_t i = peer.empty() ? impl_->listeners.size() : static_cast<unsigned char>(peer[0]);
  if (i >= impl_->listeners.size()) {
    return InvalidArgument("no peer '" + peer + "' on " + endpoint() + " (not from Receive)");
  }
  const std::string routing_id = peer.substr(1);
  return SendMessage(impl_->listeners[i]->socket, &routing_id, message,
                     impl_->listeners[i]->endpoint);
}

// Connection ------------------------------------------------------------------------------------

struct Connection::Impl {
  void* socket = nullptr;
  std::unique_ptr<HandshakeMonitor> monitor;
  std::string endpoint;
  MessageLimits limits;
  uint64_t next_request_id = 1;
  ~Impl() {
    monitor.reset();  // stops monitoring, which needs the socket
    CloseSocket(socket);
  }
};

Connection::Connection(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Connection::~Connection() = default;

Result<std::unique_ptr<Connection>> Connection::Connect(const std::string& endpoint,
                                                        const MessageLimits& limits,
                                                        const Security& security) {
  auto impl = std::make_unique<Impl>();
  impl->limits = limits;
  impl->endpoint = endpoint;
  ASSIGN_OR_RETURN(impl->socket, NewSocket(ZMQ_DEALER, limits, endpoint));
  RETURN_IF_ERROR(ApplySecurity(impl->socket, security, "", endpoint));
  ASSIGN_OR_RETURN(
      impl->monitor,
      HandshakeMonitor::Start(impl->socket, HandshakeMonitor::Side::kClient, security.curve()));
  impl->monitor->set_endpoint(endpoint);
  // ZeroMQ connects in the background and retries, so a server that starts later is reached.
  if (zmq_connect(impl->socket, endpoint.c_str()) != 0) {
    return Unavailable(ZmqError("cannot connect", endpoint));
  }
  return std::unique_ptr<Connection>(new Connection(std::move(impl)));
}

const std::string& Connection::endpoint() const { return impl_->endpoint; }

std::vector<void*> Connection::PollHandles() const {
  return {impl_->socket, impl_->monitor->events()};
}

Status Connection::Send(const Message& message) {
  // A refused connection is not retried by ZeroMQ: a send would wait for it in vain.
  RETURN_IF_ERROR(impl_->monitor->ReadEvents());
  return SendMessage(impl_->socket, nullptr, message, impl_->endpoint);
}

Status Connection::TrySend(const Message& message) {
  RETURN_IF_ERROR(impl_->monitor->ReadEvents());
  return SendMessage(impl_->socket, nullptr, message, impl_->endpoint, /*never_block=*/true);
}

Result<Message> Connection::Receive(std::chrono::milliseconds timeout) {
  RETURN_IF_ERROR(WaitReadable(impl_->socket, impl_->monitor.get(), DeadlineAfter(timeout), timeout,
                               "waiting for a message from " + impl_->endpoint));
  return ReadReply();
}

Result<Message> Connection::ReadReply() {
  const std::string context = "reply from " + impl_->endpoint;
  ASSIGN_OR_RETURN(ReceivedFrames parts,
                   ReadParts(impl_->socket, /*routed=*/false, impl_->limits, impl_->endpoint));
  RETURN_IF_ERROR(parts.status.WithContext(context));
  Result<Message> message = Decode(AsFrames(parts.msgs), impl_->limits, "this client");
  if (!message.ok()) return message.status().WithContext(context);
  return message;
}

Result<Message> Connection::Call(Message request, std::chrono::milliseconds timeout) {
  const uint64_t id = impl_->next_request_id++;
  request.request_id = id;
  RETURN_IF_ERROR(Send(request));
  const auto deadline = DeadlineAfter(timeout);
  const std::string waiting = "waiting for the reply to " +
                              std::string(MessageTypeName(request.type)) + " " +
                              std::to_string(id) + " from " + impl_->endpoint;
  while (true) {
    RETURN_IF_ERROR(WaitReadable(impl_->socket, impl_->monitor.get(), deadline, timeout, waiting));
    ASSIGN_OR_RETURN(Message reply, ReadReply());
    if (reply.request_id != id) {
      // A late reply to an earlier call that timed out; its caller has given up on it.
      VLOG(1) << "discarding stale reply " << reply.request_id << " from " << impl_->endpoint
              << " while " << waiting;
      continue;
    }
    Status status = StatusOfReply(reply);
    if (!status.ok()) {
      return status.WithContext(impl_->endpoint + " refused " + MessageTypeName(request.type));
    }
    return reply;
  }
}

}  // namespace wire
}  // namespace pstrain
