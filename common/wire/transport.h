// ZeroMQ transport for Message: a server socket (ROUTER) that many peers talk to, and a
// connection (DEALER) from one peer to one server. Tensors are sent without copies
// (zmq_msg_init_data with a free callback that keeps the tensor's buffer alive) and received
// without copies (Tensor::Wrap over the received frame; capnp reads the header in place).
// Sockets are not thread-safe: use each from one thread.
// With a wire::Security holding keys, both ends use CurveZMQ (curve.h): traffic is encrypted, a
// server lets in only the client keys it was given and logs every refused attempt, and a client
// refused by its server gets an error saying so. On a same-host ipc:// endpoint (same_host.h) the
// same keys are proved over ZMTP PLAIN instead, without encryption.
// Send and Reply return before ZeroMQ has written the tensors (it holds a copy of each Tensor, so
// the buffers stay alive): do not modify a sent tensor's buffer in place until the peer has it
// (replacing or detaching the buffer, as copy-on-write does, is safe).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/wire/curve.h"
#include "common/wire/message.h"

namespace pstrain {
namespace wire {

// ZeroMQ's I/O threads for this process (2 unless set): they carry every connection's bytes, a
// connection on one of them. Only before the first socket: FailedPrecondition after it,
// InvalidArgument outside [1, 16].
Status SetIoThreads(int threads);

// "tcp://127.0.0.1:2222" from "127.0.0.1:2222" (a bare host:port as in --ps_hosts).
std::string TcpEndpoint(const std::string& host_port);

// How many received ZeroMQ frames decoded tensors still hold (tensors wrap the frames they came
// in rather than copying them): for finding tensors kept alive longer than meant.
int64_t ReceivedFramesHeld();

struct Incoming {
  std::string peer;  // who to Reply() to: the endpoint it came in on and its ZeroMQ routing id
  // Who the sender is as its CURVE key says: the name its key was registered under in
  // Security::client_keys ("worker-1"), set by the ZAP handler, never by the peer. Empty for
  // plaintext, where nothing is authenticated.
  std::string identity;
  // The decoded message, or why it could not be decoded (the server replies with an error
  // naming that and keeps running).
  Result<Message> message = Internal("unset");
  // When `message` is an error: the request id its header carried, if that could be read, so
  // the error reply reaches the caller waiting for it (0: unknown).
  uint64_t request_id = 0;
};

// A peer's TCP connection that a server cut because ZeroMQ held more of its messages than a
// peer may make it hold (connection_guard.h): for the server's log.
struct CutConnection {
  std::string endpoint;  // the server's listener it came in on
  std::string peer;      // its address, "10.0.0.7:51234"
  std::string identity;  // its key's name as its messages carried it; "" if none came whole
  // Without an identity: the keys let in from its host, one of which it holds (CURVE only).
  std::vector<std::string> keys_from_host;
  uint64_t held_bytes = 0;
  uint64_t bound_bytes = 0;
  // Since the guard's look before this one: how long the connection could grow unseen.
  std::chrono::milliseconds since_previous_look{0};
};

class ServerSocket {
 public:
  // Binds to `endpoint` (e.g. "tcp://*:2222" or "tcp://127.0.0.1:0" for any free port).
  // With CURVE `security`, only clients whose public keys it lists get in.
  static Result<std::unique_ptr<ServerSocket>> Bind(const std::string& endpoint,
                                                    const MessageLimits& limits = {},
                                                    const Security& security = {});
  ~ServerSocket();
  // Listens on `endpoint` too, with the same limits and keys: a same-host ipc:// endpoint
  // (same_host.h), where clients prove their key by PLAIN instead of CURVE. Receive takes
  // messages from every endpoint in turn; a reply leaves by the one its request came in on.
  Status ListenAlsoOn(const std::string& endpoint);
  // The bound endpoint (Bind's) with the actual port.
  std::string endpoint() const;
  // Waits up to `timeout` for a message; Unavailable("timeout") when none came. Only requests
  // are taken: a reply sent here comes out as an Incoming whose message is an error.
  Result<Incoming> Receive(std::chrono::milliseconds timeout);
  Status Reply(const std::string& peer, const Message& message);
  // Connection attempts refused so far: unknown CURVE keys, plaintext against CURVE and the
  // reverse, clients trusting another server key. Each is logged (at most once per 10 s for
  // the same kind from the same place).
  int64_t refused_handshakes() const;
  // The raw ZeroMQ sockets to wait on (poller.h): each listener and its handshake monitor. One
  // readable means Receive has something to take (a message, or handshake events it logs).
  std::vector<void*> PollHandles() const;
  // When due (see next_guard), cuts every TCP connection holding more than a peer may of a
  // message it has not finished (connection_guard.h) and returns them; otherwise nothing. Call
  // on every turn of the serving loop, from the socket's thread.
  std::vector<CutConnection> GuardConnections();
  // The largest message (its frames' bytes) a server's key and any other key may send this
  // server, each at most the limits' max_total_bytes: what GuardConnections lets a connection
  // hold (connection_guard.h). Until called, the limits' max_total_bytes for every peer.
  void BoundPeerMessages(uint64_t client_bytes, uint64_t server_bytes);
  // When GuardConnections next looks: often enough that a peer sending at loopback speed is
  // cut near its bound, rarer the more connections there are to look at.
  std::chrono::steady_clock::time_point next_guard() const;

 private:
  struct Impl;
  explicit ServerSocket(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class Connection {
 public:
  // Connects in the background (a server that starts later is reached). With CURVE
  // `security`, the server must hold `security.server_key`'s secret and let this client in;
  // if it refuses, Receive and Call fail with FailedPrecondition("authentication refused by
  // <endpoint>: ...") as soon as ZeroMQ reports it.
  static Result<std::unique_ptr<Connection>> Connect(const std::string& endpoint,
                                                     const MessageLimits& limits = {},
                                                     const Security& security = {});
  ~Connection();
  Status Send(const Message& message);
  // As Send, but never waits: ResourceExhausted, and nothing sent, while the queue to the server
  // is full (a server that is slow, or not there: ZeroMQ queues for a server it has yet to reach).
  Status TrySend(const Message& message);
  Result<Message> Receive(std::chrono::milliseconds timeout);
  // Sends `request` (assigning a fresh request_id) and waits for the reply with that id;
  // an error reply comes back as a Status naming the server's message.
  Result<Message> Call(Message request, std::chrono::milliseconds timeout);
  const std::string& endpoint() const;
  // The raw ZeroMQ sockets to wait on (poller.h): the connection and its handshake monitor.
  std::vector<void*> PollHandles() const;

 private:
  struct Impl;
  // Reads and decodes a message that is ready to be received.
  Result<Message> ReadReply();
  explicit Connection(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace wire
}  // namespace pstrain
