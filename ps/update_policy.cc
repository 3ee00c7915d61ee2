#include "ps/update_policy.h"

#include "ps/accumulate_updates.h"
#include "ps/async_updates.h"

namespace pstrain {
namespace ps {

std::unique_ptr<UpdatePolicy> UpdatePolicy::For(UpdateMode mode, UpdateShard* shard,
                                                int64_t max_staleness, std::string log_name) {
  switch (mode) {
    case UpdateMode::kAsync:
      return std::make_unique<AsyncUpdates>(shard);
    case UpdateMode::kAccumulate:
      return std::make_unique<AccumulateUpdates>(shard, max_staleness, std::move(log_name));
    case UpdateMode::kSync:
      return std::make_unique<SyncUpdates>(shard, max_staleness, std::move(log_name));
  }
  return nullptr;
}

}  // namespace ps
}  // namespace pstrain
