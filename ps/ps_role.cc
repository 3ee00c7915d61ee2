#include "ps/ps_role.h"

#include <glog/logging.h>

#include "common/config.h"
#include "common/wire/transport.h"

namespace pstrain {
namespace ps {

Status RunParameterServer(const PsRoleOptions& o) {
  ASSIGN_OR_RETURN(ConfigNode config, ConfigNode::LoadFile(o.config_path));
  ASSIGN_OR_RETURN(ConfigNode train, config.Child("train"));
  ASSIGN_OR_RETURN(std::unique_ptr<VariableStore> store, VariableStore::FromConfig(train));
  ParameterServer server(o.server, std::move(store));
  RETURN_IF_ERROR(server.RestoreIfPresent());
  // Listen on every interface at this task's port: the host part names the machine for peers.
  const std::string port = o.bind_host_port.substr(o.bind_host_port.rfind(':') + 1);
  ASSIGN_OR_RETURN(auto socket,
                   wire::ServerSocket::Bind("tcp://*:" + port, o.limits, o.curve.ForServer()));
  if (o.curve.curve()) {
    LOG(INFO) << "ps " << o.server.task_index << ": CURVE authentication on (keys from "
              << o.curve.dir << "): " << o.curve.client_keys.size()
              << " worker and evaluator keys let in";
  } else {
    LOG(INFO) << "ps " << o.server.task_index
              << ": plaintext, no authentication (no --curve_keys): any process that reaches "
                 "this port can pull and push";
  }
  return server.Serve(socket.get());
}

}  // namespace ps
}  // namespace pstrain
