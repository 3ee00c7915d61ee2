#include "common/wire/handshake_monitor.h"

#include <glog/logging.h>
#include <zmq.h>

#include <cstdio>
#include <cstring>
#include <utility>

#include "common/wire/refusal_log.h"
#include "common/wire/zmq_context.h"

namespace pstrain {
namespace wire {
namespace {

// A client gives up after this many handshakes in a row that the server hung up on (ZeroMQ
// retries every 100 ms): a server that merely restarts refuses connections while it is down
// rather than hanging up mid-handshake, so ten in a row means it will not talk to this client.
constexpr int kHangUpsBeforeGivingUp = 10;

constexpr int kEvents = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                        ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
constexpr int kConnectionEvents = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CLOSED;
// Events waiting unread before ZeroMQ drops new ones: a lost opening would leave a connection
// unguarded, so far more than the thousands a burst of connections brings (about 100 bytes each).
constexpr int kQueuedEvents = 100000;

std::string Hex(int value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%x", static_cast<unsigned>(value));
  return text;
}

// One event: a frame of uint16 event + uint32 value, then a frame with the endpoint.
bool ReadEvent(void* socket, int* event, int* value, std::string* endpoint) {
  zmq_msg_t msg;
  zmq_msg_init(&msg);
  if (zmq_msg_recv(&msg, socket, ZMQ_DONTWAIT) < 0) {
    zmq_msg_close(&msg);
    return false;
  }
  bool ok = zmq_msg_size(&msg) == 6 && zmq_msg_more(&msg);
  if (ok) {
    uint16_t e;
    uint32_t v;
    std::memcpy(&e, zmq_msg_data(&msg), 2);
    std::memcpy(&v, static_cast<const char*>(zmq_msg_data(&msg)) + 2, 4);
    *event = e;
    *value = static_cast<int>(v);
  }
  while (zmq_msg_more(&msg)) {  // the endpoint (and anything a later version adds)
    zmq_msg_close(&msg);
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, socket, 0) < 0) break;
    endpoint->assign(static_cast<const char*>(zmq_msg_data(&msg)), zmq_msg_size(&msg));
  }
  zmq_msg_close(&msg);
  return ok;
}

}  // namespace

Result<std::unique_ptr<HandshakeMonitor>> HandshakeMonitor::Start(void* socket, Side side,
                                                                  bool curve,
                                                                  ConnectionEvent on_connection) {
  static std::atomic<int64_t> next{0};
  const std::string address = "inproc://pstrain-handshakes-" + std::to_string(next++);
  const int watched = kEvents | (on_connection ? kConnectionEvents : 0);
  if (zmq_socket_monitor(socket, address.c_str(), watched) != 0) {
    return Unavailable("zmq_socket_monitor: " + std::string(zmq_strerror(zmq_errno())));
  }
  void* events = zmq_socket(ZmqContext(), ZMQ_PAIR);
  const int linger = 0, queued = kQueuedEvents;
  if (events == nullptr || zmq_setsockopt(events, ZMQ_LINGER, &linger, sizeof(linger)) != 0 ||
      zmq_setsockopt(events, ZMQ_RCVHWM, &queued, sizeof(queued)) != 0 ||
      zmq_connect(events, address.c_str()) != 0) {
    Status error = Unavailable("handshake monitor: " + std::string(zmq_strerror(zmq_errno())));
    if (events != nullptr) zmq_close(events);
    zmq_socket_monitor(socket, nullptr, 0);
    return error;
  }
  return std::unique_ptr<HandshakeMonitor>(
      new HandshakeMonitor(socket, events, side, curve, std::move(on_connection)));
}

HandshakeMonitor::HandshakeMonitor(void* socket, void* events, Side side, bool curve,
                                   ConnectionEvent on_connection)
    : socket_(socket),
      events_(events),
      side_(side),
      curve_(curve),
      on_connection_(std::move(on_connection)) {}

HandshakeMonitor::~HandshakeMonitor() {
  zmq_socket_monitor(socket_, nullptr, 0);
  zmq_close(events_);
}

Status HandshakeMonitor::ReadEvents() {
  int event = 0, value = 0;
  std::string event_endpoint;
  while (ReadEvent(events_, &event, &value, &event_endpoint)) {
    switch (event) {
      case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
        refusal_ = Status::OK();
        failed_without_reason_ = 0;
        break;
      case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        OnHangUp(value, event_endpoint);
        break;
      case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        // A server's ZAP handler logged it, with the client's address and key.
        if (side_ == Side::kClient) {
          refusal_ = FailedPrecondition(
              "authentication refused by " + endpoint_ + ": the server does not let this " +
              "client's CURVE public key in (ZAP status " + std::to_string(value) +
              "; keys from another cluster, or a role the server does not know?)");
        }
        break;
      case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
        OnProtocolError(value, event_endpoint);
        break;
      case ZMQ_EVENT_ACCEPTED:  // the value is the connection's descriptor
        if (on_connection_) on_connection_(value, true);
        break;
      case ZMQ_EVENT_DISCONNECTED:
      case ZMQ_EVENT_CLOSED:
        if (on_connection_) on_connection_(value, false);
        break;
      default:
        break;
    }
  }
  return side_ == Side::kClient ? refusal_ : Status::OK();
}

// The peer hung up mid-handshake. A client trusting another server key sees this (the server
// cannot read its hello). With plaintext against CURVE both ends find the mismatch, and the one
// that finds it first hangs up on the other, which then sees only this; port scanners too.
void HandshakeMonitor::OnHangUp(int error, const std::string& event_endpoint) {
  if (side_ == Side::kClient) {
    ++failed_without_reason_;
    VLOG(1) << "handshake with " << endpoint_ << " failed: " << zmq_strerror(error);
    if (failed_without_reason_ >= kHangUpsBeforeGivingUp && refusal_.ok()) {
      refusal_ =
          FailedPrecondition("authentication refused by " + endpoint_ + ":" + Hint().substr(1));
    }
    return;
  }
  refused_.fetch_add(1);
  const std::string endpoint = endpoint_.empty() ? event_endpoint : endpoint_;
  PSTRAIN_REFUSAL_WARNING("hangup:" + endpoint,
                          "handshake failed on " + endpoint + ": the client hung up (" +
                              zmq_strerror(error) +
                              "): its security does not match this server's (" +
                              (curve_ ? "plaintext against CURVE?" : "CURVE against plaintext?") +
                              "), or it is a port scanner");
}

void HandshakeMonitor::OnProtocolError(int error, const std::string& event_endpoint) {
  const bool server = side_ == Side::kServer;
  std::string why;
  if (error == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
    if (server) {
      why = curve_ ? "the client speaks plaintext against this CURVE server: it has no keys (a "
                     "stray process, or a role started without --curve_keys?)"
                   : "the client speaks CURVE against this plaintext server (which was started "
                     "without --curve_keys?)";
    } else {
      why = curve_ ? "this client uses CURVE but the server is plaintext (started without "
                     "--curve_keys?)"
                   : "the server requires CURVE authentication and this client has no keys "
                     "(--curve_keys)";
    }
  } else if (error == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC) {
    why = server ? "this server could not decrypt the client's CURVE hello: the client trusts "
                   "another public key for this server (keys from another cluster?)"
                 : "the server's CURVE handshake could not be decrypted";
  } else {
    why = "ZMTP protocol error " + Hex(error) + " during the " +
          std::string(curve_ ? "CURVE" : "plaintext") + " handshake";
  }
  if (server) {
    refused_.fetch_add(1);
    const std::string endpoint = endpoint_.empty() ? event_endpoint : endpoint_;
    PSTRAIN_REFUSAL_WARNING("handshake:" + endpoint + Hex(error),
                            "handshake failed on " + endpoint + ": " + why);
  } else {
    refusal_ = FailedPrecondition("authentication refused by " + endpoint_ + ": " + why);
  }
}

std::string HandshakeMonitor::Hint() const {
  if (failed_without_reason_ == 0) return "";
  const std::string times = std::to_string(failed_without_reason_) + " handshake(s) in a row";
  // Whichever end finds a mismatch first hangs up, so a hang-up can stand for either reason.
  if (curve_) {
    return "; the server hung up on " + times +
           ", as it does when this client trusts another public key than the server's own "
           "(keys from another cluster?) or when the server is plaintext (started without "
           "--curve_keys)";
  }
  return "; the server hung up on " + times +
         ": the server requires CURVE, or is not a pstrain server (give this role --curve_keys)";
}

}  // namespace wire
}  // namespace pstrain
