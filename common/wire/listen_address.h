// Where a role listens. With CURVE it listens on every interface: only the cluster's keys get
// in, and a peer is who its key says (ps/permissions.h). In plaintext nothing is authenticated,
// so a role listens only on the loopback address its hosts entry names ("127.0.0.1:2222",
// "localhost:2222"): plaintext is for one machine. A non-loopback entry in plaintext stops the
// role at start unless the user says --insecure, as etcd refuses to serve clients without TLS
// on a public address only when told to.
#pragma once

#include <string>

#include "common/status.h"

namespace pstrain {
namespace wire {

// The ZeroMQ endpoint to bind for `host_port` (this task's entry of --ps_hosts or
// --worker_hosts). `who` names the role in errors ("ps 0").
Result<std::string> ListenEndpoint(const std::string& host_port, bool curve, bool insecure,
                                   const std::string& who);

// Whether every address `host` resolves to is a loopback address (127.0.0.0/8, ::1).
bool IsLoopbackHost(const std::string& host);

}  // namespace wire
}  // namespace pstrain
