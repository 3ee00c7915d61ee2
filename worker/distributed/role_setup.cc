#include "worker/distributed/role_setup.h"

#include <algorithm>

#include "worker/training/click_data.h"
#include "worker/training/input/input_pipeline.h"

namespace pstrain {
namespace worker {
namespace {

// A click model's named inputs and tables are CPU code, its rows a step's own exchange.
Status RefuseForClicks(const RoleOptions& o) {
  const std::string why = " is not for a model with sparse tables (the config's 'tables:'), ";
  if (o.device.device == "gpu") {
    return InvalidArgument("--device=gpu" + why + "which trains on the CPU: --device=cpu or auto");
  }
  if (o.intra_node_sync != "off") {
    return InvalidArgument("--intra_node_sync=" + o.intra_node_sync + why +
                           "whose workers each pull and push their own rows: leave it off");
  }
  if (o.elastic_data) {
    return InvalidArgument("--elastic_data" + why + "whose workers read their modulo share");
  }
  if (o.synthetic_step_ms > 0) {
    return InvalidArgument("--synthetic_step_ms" + why + "whose steps are its rows' exchange too");
  }
  return Status::OK();
}

}  // namespace

Result<RoleSetup> LoadRoleSetup(const RoleOptions& o) {
  ASSIGN_OR_RETURN(ConfigNode config, ConfigNode::LoadFile(o.config_path));
  RoleSetup s(std::move(config));
  s.clicks = s.config.Has("tables");
  RETURN_IF_ERROR(s.clicks ? s.config.CheckKeys({"model", "train", "input", "tables"})
                           : s.config.CheckKeys({"model", "train", "input"}));
  if (s.clicks) RETURN_IF_ERROR(RefuseForClicks(o));
  ASSIGN_OR_RETURN(ConfigNode model_node, s.config.Child("model"));
  ASSIGN_OR_RETURN(s.model, Model::FromConfig(model_node));
  ASSIGN_OR_RETURN(ConfigNode train_node, s.config.Child("train"));
  ASSIGN_OR_RETURN(s.train, ReadTrainConfig(train_node));
  int64_t examples = 0;
  if (s.clicks) {
    ASSIGN_OR_RETURN(examples, ClickData::CountTrainExamples(s.config, o.data_dir));
  } else {
    ASSIGN_OR_RETURN(s.input, ReadInputOptions(s.config, o.data_dir));
    ASSIGN_OR_RETURN(examples, ExamplesPerEpoch(s.input));
  }
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
