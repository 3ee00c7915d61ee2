#include "worker/distributed/collectives/collectives.h"

#include <string>

#include "common/enum_names.h"

namespace pstrain {

constexpr EnumName<CollectiveOp> kCollectiveOps[] = {
    {CollectiveOp::kAllReduce, "AllReduceAverage"},
    {CollectiveOp::kBroadcast, "Broadcast"},
    {CollectiveOp::kReduceScatter, "ReduceScatterAverage"},
    {CollectiveOp::kAllGather, "AllGather"}};

const char* CollectiveOpName(CollectiveOp op) { return NameOf(kCollectiveOps, op); }

Status CheckCollectiveCalls(const std::vector<CollectiveCall>& calls) {
  const int size = static_cast<int>(calls.size());
  const CollectiveCall& first = calls.at(0);
  for (int r = 0; r < size; ++r) {
    const CollectiveCall& c = calls[r];
    const std::string who = std::string(CollectiveOpName(c.op)) + " on rank " + std::to_string(r);
    if (c.op != first.op) {
      return InvalidArgument(who + " met " + CollectiveOpName(first.op) +
                             " on rank 0; every rank must call the same collective");
    }
    if (c.n < 0) return InvalidArgument(who + ": n must be >= 0, got " + std::to_string(c.n));
    if (c.n != first.n) {
      return InvalidArgument(who + ": n = " + std::to_string(c.n) + " but rank 0 passed n = " +
                             std::to_string(first.n) + "; every rank must pass the same n");
    }
    if (c.op == CollectiveOp::kBroadcast && (c.root < 0 || c.root >= size)) {
      return InvalidArgument(who + ": root must be in [0, " + std::to_string(size) + "), got " +
                             std::to_string(c.root));
    }
    if (c.root != first.root) {
      return InvalidArgument(who + ": root = " + std::to_string(c.root) +
                             " but rank 0 passed root = " + std::to_string(first.root));
    }
    if (c.n > 0 && !c.has_data) {
      return InvalidArgument(who + ": a data pointer is null with n = " + std::to_string(c.n));
    }
  }
  return Status::OK();
}

}  // namespace pstrain
