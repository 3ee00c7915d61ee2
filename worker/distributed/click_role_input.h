// A click model's data for a distributed role (role_input.h): a worker reads its shard of the
// click log (every shards-th example, worker/training/click_data.h), pulls the rows of each
// batch's distinct ids from the servers that own them before the step and pushes their gradients
// back just before the dense push (remote_tables.h), so a step moves only the rows it touched and,
// in accumulate and sync modes, its row pushes arrive within the step's window.
// Evaluation reads the test file with read-only pulls, which create no row and count nothing
// towards admission.
#pragma once

#include <memory>

#include "worker/distributed/role_input.h"
#include "worker/training/click_data.h"

namespace pstrain {
namespace worker {

class ClickRoleInput : public RoleInput {
 public:
  // Reads `s`'s click log for shard `shard` of `shards` and binds the model's embedding layers to
  // the config's tables over the cluster's servers.
  static Result<std::unique_ptr<ClickRoleInput>> Create(RoleSetup& s, const RoleOptions& o,
                                                        int shard, int shards,
                                                        RemoteTables::Exchange exchange);

  bool Holds(const Variable* v) const override { return tables_->Holds(v); }
  Status Start(int64_t, PsClient*, SummaryWriter*) override { return Status::OK(); }
  Result<int64_t> Next(int64_t step) override;
  float Forward(Model* model, std::mt19937_64* rng,
                const std::function<void(int)>& before_layer) override;
  Status PushRows(int64_t step) override { return tables_->Apply(batch_, step); }
  Result<Evaluation> Evaluate(Model* model, int64_t step) override;

 private:
  ClickRoleInput(ClickData data, int64_t batch_size)
      : data_(std::move(data)), batch_size_(batch_size) {}

  ClickData data_;
  int64_t batch_size_;
  std::unique_ptr<RemoteTables> tables_;
  FeatureBatch batch_;  // the step's, until PushRows pushed its rows
};

}  // namespace worker
}  // namespace pstrain
