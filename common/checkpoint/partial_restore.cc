#include "common/checkpoint/partial_restore.h"

#include <fnmatch.h>

namespace pstrain {
namespace {

bool Matches(const std::string& pattern, const std::string& name) {
  if (pattern.find_first_of("*?[") != std::string::npos) {
    return fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
  }
  return name.compare(0, pattern.size(), pattern) == 0;
}

bool MatchesAny(const std::vector<std::string>& patterns, const std::string& name) {
  for (const std::string& p : patterns) {
    if (Matches(p, name)) return true;
  }
  return false;
}

}  // namespace

bool RestoreFilter::Accepts(const std::string& name) const {
  if (!include.empty() && !MatchesAny(include, name)) return false;
  return !MatchesAny(exclude, name);
}

Result<RestoreReport> RestoreInto(const CheckpointData& checkpoint, const RestoreFilter& filter,
                                  std::map<std::string, Tensor>* targets) {
  RestoreReport report;
  std::vector<std::pair<const Tensor*, Tensor*>> copies;
  for (auto& [name, target] : *targets) {
    if (!filter.Accepts(name)) {
      report.filtered.push_back(name);
      continue;
    }
    auto it = checkpoint.tensors.find(name);
    if (it == checkpoint.tensors.end()) {
      report.missing.push_back(name);
      continue;
    }
    if (it->second.shape() != target.shape()) {
      return InvalidArgument("cannot restore tensor '" + name + "': checkpoint has shape " +
                             it->second.shape().ToString() + " but the variable has shape " +
                             target.shape().ToString());
    }
    copies.emplace_back(&it->second, &target);
    report.restored.push_back(name);
  }
  for (const auto& entry : checkpoint.tensors) {
    if (filter.Accepts(entry.first) && targets->count(entry.first) == 0) {
      report.unused.push_back(entry.first);
    }
  }
  // Shapes are all checked first so that a mismatch leaves every target as it was.
  for (auto& [from, to] : copies) to->CopyFrom(*from);
  return report;
}

}  // namespace pstrain
