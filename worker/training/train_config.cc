#include "worker/training/train_config.h"

#include "common/data/idx.h"
#include "worker/training/input/preprocess.h"

namespace pstrain {
namespace worker {

Result<TrainConfig> ReadTrainConfig(const ConfigNode& train) {
  RETURN_IF_ERROR(train.CheckKeys({"seed", "batch_size", "epochs", "max_steps", "optimizer",
                                   "learning_rate", "clipping", "weight_decay"}));
  TrainConfig c;
  ASSIGN_OR_RETURN(int64_t seed, train.GetInt("seed", 1));
  c.seed = static_cast<uint64_t>(seed);
  ASSIGN_OR_RETURN(c.batch_size, train.GetInt("batch_size", 128));
  ASSIGN_OR_RETURN(c.epochs, train.GetInt("epochs", 1));
  ASSIGN_OR_RETURN(c.max_steps, train.GetInt("max_steps", 0));
  ASSIGN_OR_RETURN(c.weight_decay, train.GetDouble("weight_decay", 0.0));
  if (c.batch_size < 1) return train.Error("field 'batch_size' must be >= 1");
  if (c.epochs < 1) return train.Error("field 'epochs' must be >= 1");
  if (c.weight_decay < 0) return train.Error("field 'weight_decay' must be >= 0");
  if (train.Has("clipping")) {
    ASSIGN_OR_RETURN(ConfigNode clip, train.Child("clipping"));
    ASSIGN_OR_RETURN(c.clipping, ps::ClippingOptions::FromConfig(clip));
  }
  return c;
}

Result<InputOptions> ReadInputOptions(const ConfigNode& config, const std::string& data_dir) {
  InputOptions input;
  if (config.Has("input")) {
    ASSIGN_OR_RETURN(ConfigNode input_node, config.Child("input"));
    ASSIGN_OR_RETURN(input, InputOptions::FromConfig(input_node));
  }
  if (!data_dir.empty()) input.data_dir = data_dir;
  // TFRecord images are decoded and fitted to what the model takes ([C, H, W]); the model's
  // own reader reports a malformed `input`.
  if (config.Has("model")) {
    ASSIGN_OR_RETURN(ConfigNode model, config.Child("model"));
    if (model.Has("input")) {
      Result<std::vector<int64_t>> dims = model.GetIntList("input");
      if (dims.ok() && dims->size() == 3 && (*dims)[0] > 0 && (*dims)[1] > 0 && (*dims)[2] > 0) {
        input.image_shape = ImageShape{(*dims)[1], (*dims)[2], (*dims)[0]};
      }
    }
  }
  if (input.source == InputSource::kIdx) {
    ASSIGN_OR_RETURN(ImageSet set, LoadFashionMnist(input.data_dir, Split::kTrain));
    auto shared = std::make_shared<const ImageSet>(std::move(set));
    if (input.mean.empty()) {
      Normalization norm = ComputeNormalization(*shared);
      input.mean = norm.mean;
      input.stddev = norm.stddev;
    }
    input.images = shared;
  } else if (input.mean.empty()) {
    LOG(WARNING) << "input.mean/std not set for TFRecord input; using x/255 only";
  }
  return input;
}

}  // namespace worker
}  // namespace pstrain
