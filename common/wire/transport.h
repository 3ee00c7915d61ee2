// ZeroMQ transport for Message: a server socket (ROUTER) that many peers talk to, and a
// connection (DEALER) from one peer to one server. Tensors are sent without copies
// (zmq_msg_init_data with a free callback that keeps the tensor's buffer alive) and received
// without copies (Tensor::Wrap over the received frame; capnp reads the header in place).
// Sockets are not thread-safe: use each from one thread.
// Send and Reply return before ZeroMQ has written the tensors (it holds a copy of each Tensor, so
// the buffers stay alive): do not modify a sent tensor's buffer in place until the peer has it
// (replacing or detaching the buffer, as copy-on-write does, is safe).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"
#include "common/wire/message.h"

namespace pstrain {
namespace wire {

// "tcp://127.0.0.1:2222" from "127.0.0.1:2222" (a bare host:port as in --ps_hosts).
std::string TcpEndpoint(const std::string& host_port);

// How many received ZeroMQ frames decoded tensors still hold (tensors wrap the frames they came
// in rather than copying them): for finding tensors kept alive longer than meant.
int64_t ReceivedFramesHeld();

struct Incoming {
  std::string peer;  // ZeroMQ routing id of the sender, to Reply() to
  // The decoded message, or why it could not be decoded (the server replies with an error
  // naming that and keeps running).
  Result<Message> message = Internal("unset");
};

class ServerSocket {
 public:
  // Binds to `endpoint` (e.g. "tcp://*:2222" or "tcp://127.0.0.1:0" for any free port).
  static Result<std::unique_ptr<ServerSocket>> Bind(const std::string& endpoint,
                                                    const MessageLimits& limits = {});
  ~ServerSocket();
  // The bound endpoint with the actual port.
  std::string endpoint() const;
  // Waits up to `timeout` for a message; Unavailable("timeout") when none came.
  Result<Incoming> Receive(std::chrono::milliseconds timeout);
  Status Reply(const std::string& peer, const Message& message);

 private:
  struct Impl;
  explicit ServerSocket(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class Connection {
 public:
  static Result<std::unique_ptr<Connection>> Connect(const std::string& endpoint,
                                                     const MessageLimits& limits = {});
  ~Connection();
  Status Send(const Message& message);
  Result<Message> Receive(std::chrono::milliseconds timeout);
  // Sends `request` (assigning a fresh request_id) and waits for the reply with that id;
  // an error reply comes back as a Status naming the server's message.
  Result<Message> Call(Message request, std::chrono::milliseconds timeout);
  const std::string& endpoint() const;

 private:
  struct Impl;
  // Reads and decodes a message that is ready to be received.
  Result<Message> ReadReply();
  explicit Connection(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace wire
}  // namespace pstrain
