#include "ps/ps_role.h"

#include <glog/logging.h>

#include <chrono>
#include <functional>
#include <memory>

#include "common/config.h"
#include "common/wire/listen_address.h"
#include "common/wire/same_host.h"
#include "common/wire/transport.h"
#include "ps/message_bound.h"
#include "ps/server_task.h"

namespace pstrain {
namespace ps {

Status RunParameterServer(const PsRoleOptions& o) {
  ASSIGN_OR_RETURN(ConfigNode config, ConfigNode::LoadFile(o.config_path));
  ASSIGN_OR_RETURN(ConfigNode train, config.Child("train"));
  // Checked before the port is taken; each shard held gets its own store from it.
  RETURN_IF_ERROR(VariableStore::FromConfig(train).status());
  // Embedding tables, when the config has them: this task's rows of each (ps/table_shard.h).
  std::function<Result<std::unique_ptr<TableShard>>(int)> new_tables;
  if (config.Has("tables")) {
    ASSIGN_OR_RETURN(ConfigNode tables, config.Child("tables"));
    new_tables = [tables, servers = o.server.num_ps, binades = o.server.outlier_binades,
                  max = o.max_table_rows](int shard) {
      return TableShard::FromConfig(tables, max, TableShardOptions{shard, servers, binades});
    };
    RETURN_IF_ERROR(new_tables(o.server.task_index).status());
  }
  const std::string who = "ps " + std::to_string(o.server.task_index);
  ASSIGN_OR_RETURN(MessageSources sources,
                   ReadMessageSources(config, o.variable_bytes, o.max_table_rows));
  sources.replicated = o.server.replicas > 0;
  sources.header_bytes = o.limits.max_header_bytes;
  sources.max_message_bytes = o.limits.max_total_bytes;
  const MessageBound bound = BoundMessages(sources);
  ASSIGN_OR_RETURN(std::string listen,
                   wire::ListenEndpoint(o.bind_host_port, o.curve.curve(), o.insecure, who));
  ASSIGN_OR_RETURN(auto socket, wire::ServerSocket::Bind(listen, o.limits, o.curve.ForServer()));
  socket->BoundPeerMessages(bound.client_bytes, bound.server_bytes);
  LOG(INFO) << who << ": cuts a connection holding more of an unfinished message than "
            << DescribeBound(bound);
  if (o.curve.curve()) {
    LOG(INFO) << "ps " << o.server.task_index << ": CURVE authentication on (keys from "
              << o.curve.dir << "): " << o.curve.client_keys.size()
              << " worker and evaluator keys let in";
    // Roles on this host that reach it at a loopback address come in here, unencrypted.
    const std::string same_host = wire::SameHostEndpoint(o.curve, o.server.task_index);
    if (!same_host.empty()) {
      RETURN_IF_ERROR(socket->ListenAlsoOn(same_host).WithContext(who));
      LOG(INFO) << who << ": same-host roles on " << same_host
                << " (their keys checked, no encryption: the directory is this user's alone)";
    }
  } else {
    LOG(INFO) << "ps " << o.server.task_index
              << ": plaintext, no authentication (no --curve_keys) on " << listen
              << ": any process that reaches it is believed about who it is";
  }
  std::unique_ptr<ServerSummary> summary;
  if (!o.logdir.empty() && o.summary_secs > 0) {
    auto opened = ServerSummary::Open(o.logdir, o.server.task_index, o.summary_secs,
                                      std::chrono::steady_clock::now());
    if (!opened.ok()) return opened.status().WithContext(who + ": --logdir");
    summary = std::move(opened).value();
    LOG(INFO) << who << ": TensorBoard scalars every " << o.summary_secs << " s in "
              << summary->path();
  }
  ServerTaskOptions t;
  t.server = o.server;
  t.ps_hosts = o.ps_hosts;
  t.keys = o.curve;
  t.limits = o.limits;
  t.new_store = [train] { return VariableStore::FromConfig(train); };
  t.new_tables = new_tables;
  ASSIGN_OR_RETURN(std::unique_ptr<ServerTask> task, ServerTask::Create(t, std::move(socket)));
  return task->Serve(summary.get());
}

}  // namespace ps
}  // namespace pstrain
