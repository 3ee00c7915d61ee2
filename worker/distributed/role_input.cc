#include "worker/distributed/role_input.h"

#include "worker/distributed/click_role_input.h"
#include "worker/distributed/image_role_input.h"

namespace pstrain {
namespace worker {

std::vector<Variable*> ServerVariables(Model* model, const RoleInput& input) {
  std::vector<Variable*> out;
  for (Variable* v : model->variables()) {
    if (!input.Holds(v)) out.push_back(v);
  }
  return out;
}

Result<std::unique_ptr<RoleInput>> OpenRoleInput(RoleSetup& s, const RoleOptions& o, int shard,
                                                 int shards, RemoteTables::Exchange exchange) {
  if (s.clicks) {
    ASSIGN_OR_RETURN(std::unique_ptr<ClickRoleInput> clicks,
                     ClickRoleInput::Create(s, o, shard, shards, std::move(exchange)));
    return std::unique_ptr<RoleInput>(std::move(clicks));
  }
  return std::unique_ptr<RoleInput>(std::make_unique<ImageRoleInput>(
      s.input, s.train.batch_size, s.train.seed, shard, shards, o.elastic_data));
}

}  // namespace worker
}  // namespace pstrain
