#include "worker/distributed/role_setup.h"

#include <algorithm>

#include "worker/training/input/input_pipeline.h"

namespace pstrain {
namespace worker {

Result<RoleSetup> LoadRoleSetup(const RoleOptions& o) {
  ASSIGN_OR_RETURN(ConfigNode config, ConfigNode::LoadFile(o.config_path));
  RoleSetup s(std::move(config));
  RETURN_IF_ERROR(s.config.CheckKeys({"model", "train", "input"}));
  ASSIGN_OR_RETURN(ConfigNode model_node, s.config.Child("model"));
  ASSIGN_OR_RETURN(s.model, Model::FromConfig(model_node));
  ASSIGN_OR_RETURN(ConfigNode train_node, s.config.Child("train"));
  ASSIGN_OR_RETURN(s.train, ReadTrainConfig(train_node));
  ASSIGN_OR_RETURN(s.input, ReadInputOptions(s.config, o.data_dir));
  ASSIGN_OR_RETURN(const int64_t examples, ExamplesPerEpoch(s.input));
  // Global steps per epoch do not depend on the number of workers: each push is one step.
  s.steps_per_epoch = std::max<int64_t>(1, examples / s.train.batch_size);
  const int64_t epochs = o.epochs > 0 ? o.epochs : s.train.epochs;
  s.max_steps = o.max_steps > 0
                    ? o.max_steps
                    : (s.train.max_steps > 0 ? s.train.max_steps : epochs * s.steps_per_epoch);
  s.until_data_ends = o.elastic_data && o.max_steps == 0 && s.train.max_steps == 0;
  s.model->InitVariables(s.train.seed);
  return s;
}

Result<ElasticData> ReadElasticData(const RoleOptions& o) {
  ASSIGN_OR_RETURN(ConfigNode config, ConfigNode::LoadFile(o.config_path));
  ASSIGN_OR_RETURN(ConfigNode train_node, config.Child("train"));
  ASSIGN_OR_RETURN(TrainConfig train, ReadTrainConfig(train_node));
  ASSIGN_OR_RETURN(InputOptions input, ReadInputOptions(config, o.data_dir));
  ElasticData d;
  ASSIGN_OR_RETURN(d.examples, ExamplesPerEpoch(input));
  d.epochs = o.epochs > 0 ? o.epochs : train.epochs;
  d.seed = train.seed;
  return d;
}

}  // namespace worker
}  // namespace pstrain
