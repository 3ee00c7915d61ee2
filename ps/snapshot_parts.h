// A joiner's copy of a shard (ParameterServer::Snapshot) sorted into what it installs, and
// checked before anything changes: ParameterServer::InstallSnapshot installs only what passes.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/wire/message.h"
#include "ps/variable_store.h"

namespace pstrain {
namespace ps {

// The copy's tensors by kind: variable values, their optimizer slots ("<var>/<slot>"), and
// embedding-table rows.
struct SnapshotParts {
  std::map<std::string, Tensor> values, slots, rows;
};

// Sorts the copy's tensors and checks them: each name once, rows only where the shard holds
// tables, every variable with each of `slot_names` in its shape and, where `held` is given (a
// shard already initialised), the very variables `held` holds, in their shapes.
Result<SnapshotParts> SplitSnapshot(const std::vector<wire::NamedTensor>& tensors,
                                    const std::vector<std::string>& slot_names, bool holds_tables,
                                    const VariableStore* held);

// The copy's step and record within a push's range, and a chain link of the right size.
Status CheckSnapshotPlace(const wire::Message& copy);

}  // namespace ps
}  // namespace pstrain
