#include "ps/snapshot_parts.h"

#include <algorithm>
#include <cstdint>

#include "common/wire/chain_link.h"
#include "ps/table_shard.h"

namespace pstrain {
namespace ps {
namespace {

// Each variable has every slot, of its own shape; an initialised shard holds it already.
Status CheckVariables(const SnapshotParts& parts, const std::vector<std::string>& slot_names,
                      const VariableStore* held) {
  std::vector<std::string> names;
  for (const auto& [name, value] : parts.values) {
    for (const std::string& slot : slot_names) {
      auto it = parts.slots.find(name + "/" + slot);
      if (it == parts.slots.end()) {
        return InvalidArgument("the copy lacks slot '" + name + "/" + slot + "'");
      }
      if (it->second.shape() != value.shape()) {
        return InvalidArgument("the copy's slot '" + it->first + "' is " +
                               it->second.shape().ToString() + ", its variable " +
                               value.shape().ToString());
      }
    }
    if (held != nullptr && (!held->Has(name) || held->Value(name).shape() != value.shape())) {
      return FailedPrecondition("the copy's variable '" + name + "' " + value.shape().ToString() +
                                " is not one this shard holds");
    }
    names.push_back(name);
  }
  if (held != nullptr && names != held->Names()) {
    return FailedPrecondition("the copy holds other variables than this shard");
  }
  return Status::OK();
}

}  // namespace

Result<SnapshotParts> SplitSnapshot(const std::vector<wire::NamedTensor>& tensors,
                                    const std::vector<std::string>& slot_names, bool holds_tables,
                                    const VariableStore* held) {
  SnapshotParts parts;
  for (const auto& t : tensors) {
    const bool row = TableShard::IsRowTensor(t.name);
    if (row && !holds_tables) {
      return FailedPrecondition("the copy carries table rows ('" + t.name +
                                "') and this server holds no tables");
    }
    if (!(row ? parts.rows : parts.values).emplace(t.name, t.tensor).second) {
      return InvalidArgument("the copy carries '" + t.name + "' twice");
    }
  }
  // "<var>/<slot>" is a slot where <var> is in the copy too (checkpoints name them so).
  for (const auto& t : tensors) {
    const size_t slash = t.name.rfind('/');
    if (slash == std::string::npos || !parts.values.count(t.name.substr(0, slash))) continue;
    const std::string slot = t.name.substr(slash + 1);
    if (std::find(slot_names.begin(), slot_names.end(), slot) == slot_names.end()) continue;
    parts.slots[t.name] = t.tensor;
    parts.values.erase(t.name);
  }
  RETURN_IF_ERROR(CheckVariables(parts, slot_names, held));
  return parts;
}

Status CheckSnapshotPlace(const wire::Message& copy) {
  constexpr int64_t kMaxStep = int64_t{1} << 53;  // as a push's step
  if (copy.value < 0 || copy.value > kMaxStep || copy.sequence > uint64_t{1} << 53) {
    return InvalidArgument("a copy at record " + std::to_string(copy.sequence) + " and step " +
                           std::to_string(copy.value) + "; both are from 0 to 2^53");
  }
  if (copy.link.size() != wire::kChainLinkBytes) {
    return InvalidArgument("a copy with a chain link of " + std::to_string(copy.link.size()) +
                           " bytes (expected " + std::to_string(wire::kChainLinkBytes) + ")");
  }
  return Status::OK();
}

}  // namespace ps
}  // namespace pstrain
