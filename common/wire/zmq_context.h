// The process's one ZeroMQ context (inside the wire library). The ZAP handler must live on the
// same context as the server sockets it authenticates: ZeroMQ looks it up per context.
#pragma once

namespace pstrain {
namespace wire {

// Created on first use with the transport's I/O threads; never destroyed (zmq_ctx_term would
// wait for sockets that static destructors of other objects may still hold).
void* ZmqContext();

}  // namespace wire
}  // namespace pstrain
