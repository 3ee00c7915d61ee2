#include "worker/distributed/image_role_input.h"

#include "common/summary/summary_writer.h"
#include "worker/distributed/ps_client.h"

namespace pstrain {
namespace worker {

Status ImageRoleInput::Start(int64_t step, PsClient* client, SummaryWriter* log) {
  client_ = client;
  first_images_ = log;
  ASSIGN_OR_RETURN(pipeline_, InputPipeline::Create(input_, batch_size_, shard_, shards_,
                                                    seed_ + 1000 * shard_ + step));
  return Status::OK();
}

Result<int64_t> ImageRoleInput::Next(int64_t step) {
  ASSIGN_OR_RETURN(batch_, pipeline_->Next());
  if (elastic_) client_->set_data_uses(batch_.uses);
  if (first_images_ != nullptr) {
    first_images_->AddImages("input", step, batch_.images, 3);
    first_images_ = nullptr;
  }
  return batch_.images.dim(0);
}

float ImageRoleInput::Forward(Model* model, std::mt19937_64* rng,
                              const std::function<void(int)>& before_layer) {
  return model->Forward(batch_.images, batch_.labels, /*training=*/true, rng, before_layer);
}

}  // namespace worker
}  // namespace pstrain
