// An image model's data for a distributed role (role_input.h): a worker's batches from the input
// pipeline (its modulo share, or chunks leased with --elastic_data), every variable a server's;
// evaluation over the test split.
#pragma once

#include <memory>

#include "worker/distributed/role_input.h"
#include "worker/training/input/input_pipeline.h"

namespace pstrain {
namespace worker {

class ImageRoleInput : public RoleInput {
 public:
  // `input` is borrowed (an elastic worker sets its lease before Start). The pipeline's seed is
  // `seed` + 1000 * shard + the starting step, so a restarted worker does not repeat its order.
  ImageRoleInput(const InputOptions& input, int64_t batch_size, uint64_t seed, int shard,
                 int shards, bool elastic)
      : input_(input),
        batch_size_(batch_size),
        seed_(seed),
        shard_(shard),
        shards_(shards),
        elastic_(elastic) {}

  bool Holds(const Variable*) const override { return false; }
  Status Start(int64_t step, PsClient* client, SummaryWriter* log) override;
  Result<int64_t> Next(int64_t step) override;
  float Forward(Model* model, std::mt19937_64* rng,
                const std::function<void(int)>& before_layer) override;
  Status PushRows(int64_t) override { return Status::OK(); }
  Result<Evaluation> Evaluate(Model* model, int64_t) override {
    return worker::Evaluate(model, input_, seed_);
  }

 private:
  const InputOptions& input_;
  int64_t batch_size_;
  uint64_t seed_;
  int shard_, shards_;
  bool elastic_;
  std::unique_ptr<InputPipeline> pipeline_;
  PsClient* client_ = nullptr;
  SummaryWriter* first_images_ = nullptr;  // null once written
  Batch batch_;
};

}  // namespace worker
}  // namespace pstrain
