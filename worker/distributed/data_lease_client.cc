#include "worker/distributed/data_lease_client.h"

#include "common/wire/same_host.h"

namespace pstrain {
namespace worker {

Result<std::unique_ptr<DataLeaseClient>> DataLeaseClient::Connect(
    const std::vector<std::string>& ps_hosts, const std::string& role, int task_index,
    const wire::ClusterKeys& curve) {
  if (ps_hosts.empty()) return InvalidArgument("--elastic_data needs a parameter server");
  std::unique_ptr<DataLeaseClient> c(new DataLeaseClient());
  ASSIGN_OR_RETURN(wire::ServerRoute route, wire::RouteToServer(curve, 0, ps_hosts[0]));
  ASSIGN_OR_RETURN(c->server0_, wire::Connection::Connect(route.endpoint, {}, route.security));
  c->role_ = role;
  c->task_index_ = task_index;
  return c;
}

Result<data::ChunkLease> DataLeaseClient::Lease(int64_t epoch) {
  std::lock_guard<std::mutex> lock(mutex_);
  wire::Message request;
  request.type = wire::MessageType::kDataLease;
  request.role = role_;
  request.task_index = task_index_;
  request.incarnation = wire::ProcessIncarnation();
  request.value = epoch;
  Result<wire::Message> reply = server0_->Call(request, std::chrono::seconds(30));
  if (!reply.ok()) return reply.status();
  if (reply->uses.size() != 1) {
    return DataLoss("ps 0's dataLease reply carries " + std::to_string(reply->uses.size()) +
                    " chunk entries; expected 1");
  }
  const wire::ChunkUse& u = reply->uses[0];
  return data::ChunkLease{u.epoch, u.chunk, u.count, static_cast<int64_t>(reply->sequence),
                          reply->value};
}

}  // namespace worker
}  // namespace pstrain
