#include "worker/training/warm_start.h"

#include <filesystem>
#include <map>
#include <sstream>

#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/checkpoint_manager.h"
#include "common/checkpoint/joined_checkpoint.h"
#include "common/checkpoint/tf_checkpoint.h"

namespace pstrain {
namespace worker {
namespace {

// A TensorFlow checkpoint must hold every variable the filter accepts, in the model's shape: a
// name or shape that differs means the graphs differ, which TF's own Saver refuses too.
Status CheckTfVariables(const std::string& checkpoint, const CheckpointData& data,
                        const RestoreFilter& filter, const std::map<std::string, Tensor>& targets) {
  for (const auto& [name, target] : targets) {
    if (!filter.Accepts(name)) continue;
    auto it = data.tensors.find(name);
    if (it == data.tensors.end()) {
      std::string held;
      size_t listed = 0;
      for (auto e = data.tensors.begin(); e != data.tensors.end() && listed < 30; ++e, ++listed) {
        held += (held.empty() ? "" : ", ") + e->first;
      }
      if (data.tensors.size() > listed) held += ", ...";
      return InvalidArgument("the model's variable '" + name +
                             "' is not in TensorFlow checkpoint " + checkpoint +
                             ", which holds: " + held + " (--restore_exclude=" + name +
                             " leaves it at its initial value)");
    }
    if (it->second.shape() != target.shape()) {
      return InvalidArgument("the model's variable '" + name + "' has shape " +
                             TfShape(target.shape()).ToString() +
                             " in TensorFlow's layout, but TensorFlow checkpoint " + checkpoint +
                             " holds it as " + TfShape(it->second.shape()).ToString());
    }
  }
  return Status::OK();
}

}  // namespace

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

Result<RestoreReport> WarmStart(const std::string& checkpoint,
                                const std::vector<std::string>& exclude, Model* model,
                                const TfLayout& layout) {
  Result<CheckpointData> data = FailedPrecondition("unread");
  if (std::filesystem::is_directory(checkpoint)) {
    CheckpointManager dir(checkpoint, 0);
    dir.set_tf_layout(layout);
    data = dir.RestoreLatest();
  } else {
    data = ReadCheckpointOrTfBundle(checkpoint, layout);
  }
  if (!data.ok()) {
    return data.status().WithContext("--checkpoint_path=" + checkpoint + " (the warm start)");
  }
  // A parameter server's checkpoint holds a variable split across servers as its parts.
  RETURN_IF_ERROR(JoinSplitVariables(&data.value()).WithContext("--checkpoint_path=" + checkpoint));
  std::map<std::string, Tensor> targets;  // sharing the variables' buffers: restored in place
  for (Variable* v : model->variables()) targets[v->name] = v->value;
  RestoreFilter filter;
  filter.exclude = exclude;
  if (IsFromTfBundle(*data)) RETURN_IF_ERROR(CheckTfVariables(checkpoint, *data, filter, targets));
  return RestoreInto(*data, filter, &targets);
}

std::string DescribeWarmStart(const std::string& checkpoint, const RestoreReport& report) {
  std::string s = "warm start from " + checkpoint + ": " + std::to_string(report.restored.size()) +
                  " variable(s) restored";
  if (!report.filtered.empty()) {
    s += ", " + std::to_string(report.filtered.size()) +
         " left at their initial values by --restore_exclude";
  }
  if (!report.missing.empty()) {
    s += ", " + std::to_string(report.missing.size()) + " not in the checkpoint (initial values, " +
         "e.g. " + report.missing[0] + ")";
  }
  if (!report.unused.empty()) {
    s += ", " + std::to_string(report.unused.size()) + " of its tensors unused (e.g. " +
         report.unused[0] + ")";
  }
  return s + "; the global step and the optimizer's slots start fresh";
}

}  // namespace worker
}  // namespace pstrain
