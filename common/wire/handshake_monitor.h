// Watches one socket's ZMTP handshakes (zmq_socket_monitor), so that a refused connection is
// seen rather than showing up as a silent timeout. A server logs clients it refused for their
// mechanism (plaintext against CURVE, CURVE against plaintext, a client trusting another server
// key); the ZAP handler logs the ones with unknown keys. A client turns the server's refusal into
// an error naming the endpoint. Events are read by the socket's own thread, while it waits for
// messages (transport.cc). A server's monitor also reports each TCP connection opened and closed
// (its descriptor), for the connection guard (connection_guard.h). Inside the wire library.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"

namespace pstrain {
namespace wire {

class HandshakeMonitor {
 public:
  enum class Side { kServer, kClient };
  // A connection's descriptor, opened (accepted) or closed.
  using ConnectionEvent = std::function<void(int fd, bool opened)>;

  // Starts watching `socket`; call before it binds or connects so that no event is missed.
  // `curve`: whether the socket uses CURVE (for the messages). With `on_connection`, each
  // connection opened and closed is passed to it too, as ReadEvents reads them.
  static Result<std::unique_ptr<HandshakeMonitor>> Start(void* socket, Side side, bool curve,
                                                         ConnectionEvent on_connection = nullptr);
  ~HandshakeMonitor();  // stops watching: `socket` must still be open

  void set_endpoint(const std::string& endpoint) { endpoint_ = endpoint; }
  // Readable (ZMQ_POLLIN) when events wait.
  void* events() const { return events_; }
  // Reads the events that wait. A server logs refusals and returns OK; a client returns
  // FailedPrecondition once the server refused it (until a later handshake succeeds).
  Status ReadEvents();
  // What failed handshakes said, to add to a client's timeout message ("" if nothing).
  std::string Hint() const;
  // Server: handshakes that failed (a mechanism mismatch, a hello it could not decrypt, a
  // client hanging up mid-handshake); the ZAP handler counts unknown keys.
  int64_t refused() const { return refused_.load(); }

 private:
  HandshakeMonitor(void* socket, void* events, Side side, bool curve,
                   ConnectionEvent on_connection);
  void OnHangUp(int error, const std::string& event_endpoint);
  void OnProtocolError(int error, const std::string& event_endpoint);

  void* socket_;
  void* events_;  // PAIR connected to the monitor's inproc endpoint
  Side side_;
  bool curve_;
  std::string endpoint_;
  ConnectionEvent on_connection_;
  Status refusal_;                   // client: why the server refused us
  int failed_without_reason_ = 0;    // client: since the last successful handshake
  std::atomic<int64_t> refused_{0};  // server
};

}  // namespace wire
}  // namespace pstrain
