#include "worker/training/update_placement.h"

#include <glog/logging.h>

namespace pstrain {
namespace worker {

std::string HostOnlyReason(const TrainConfig& train, const ps::OptimizerRule& rule, bool tables) {
  if (tables) return "the model's sparse tables are updated on the host";
  if (train.clipping.enabled()) return "gradient clipping runs on the host";
  if (train.weight_decay != 0) return "weight decay is added on the host";
  Status supported = DeviceUpdateSupports(rule);
  if (!supported.ok()) return supported.message();
  return "";
}

Result<std::unique_ptr<DeviceUpdate>> PlaceUpdate(const TrainConfig& train, bool tables,
                                                  const ComputeDevice& device,
                                                  ps::VariableStore* store, Model* model) {
  const ps::OptimizerRule rule = store->optimizer().rule();
  if (device.device() != Device::kGpu) return std::unique_ptr<DeviceUpdate>();
  const std::string reason = HostOnlyReason(train, rule, tables);
  if (!reason.empty()) {
    LOG(INFO) << "trainer: the " << rule.type << " update runs on the host (" << reason
              << "): gradients to the host and values back every step";
    return std::unique_ptr<DeviceUpdate>();
  }
  const std::map<std::string, Tensor> state = store->StateTensors();
  const std::vector<std::string> slot_names = store->optimizer().slot_names();
  std::vector<UpdatedVariable> variables;
  for (Variable* v : model->trainable_variables()) {
    UpdatedVariable u;
    u.variable = v;
    for (const std::string& slot : slot_names) {
      auto it = state.find(v->name + "/" + slot);
      if (it == state.end())
        return Internal("the store holds no slot '" + slot + "' of " + v->name);
      u.slots.push_back(it->second);  // shares the store's buffer: checkpoints see the download
    }
    variables.push_back(std::move(u));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceUpdate> update,
                   NewGpuUpdate(device.gpu(), rule, std::move(variables), model->variables()));
  model->set_update_on_device(true);
  LOG(INFO) << "trainer: the " << rule.type << " update runs on the GPU beside the model "
            << "(variables, gradients and slots stay in device memory)";
  return update;
}

}  // namespace worker
}  // namespace pstrain
