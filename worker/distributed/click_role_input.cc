#include "worker/distributed/click_role_input.h"

namespace pstrain {
namespace worker {

Result<std::unique_ptr<ClickRoleInput>> ClickRoleInput::Create(RoleSetup& s, const RoleOptions& o,
                                                               int shard, int shards,
                                                               RemoteTables::Exchange exchange) {
  // The shuffle differs by shard, as an image worker's pipeline does.
  ASSIGN_OR_RETURN(ClickData data,
                   ClickData::Read(s.config, *s.model, o.data_dir, ClickShard{shard, shards},
                                   s.train.seed + 1000 * shard));
  std::unique_ptr<ClickRoleInput> in(new ClickRoleInput(std::move(data), s.train.batch_size));
  ASSIGN_OR_RETURN(ConfigNode tables_node, s.config.Child("tables"));
  ASSIGN_OR_RETURN(in->tables_,
                   RemoteTables::Create(tables_node, s.model.get(),
                                        static_cast<int>(o.ps_hosts.size()), std::move(exchange)));
  return in;
}

Result<int64_t> ClickRoleInput::Next(int64_t step) {
  batch_ = data_.Next(batch_size_);
  RETURN_IF_ERROR(tables_->Gather(batch_, step, /*training=*/true));
  return static_cast<int64_t>(batch_.labels.size());
}

float ClickRoleInput::Forward(Model* model, std::mt19937_64* rng,
                              const std::function<void(int)>& before_layer) {
  return model->Forward(InputPointers(batch_), batch_.labels, /*training=*/true, rng, before_layer);
}

Result<Evaluation> ClickRoleInput::Evaluate(Model* model, int64_t step) {
  return data_.Evaluate(model, batch_size_, [&](const FeatureBatch& batch) {
    return tables_->Gather(batch, step, /*training=*/false);
  });
}

}  // namespace worker
}  // namespace pstrain
