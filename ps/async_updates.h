// --update_mode=async (ps/update_policy.h).
#pragma once

#include <string>
#include <vector>

#include "ps/update_policy.h"

namespace pstrain {
namespace ps {

class AsyncUpdates : public UpdatePolicy {
 public:
  explicit AsyncUpdates(UpdateShard* shard) : shard_(shard) {}
  const char* name() const override { return "async"; }
  bool TakesParts() const override { return true; }
  void Take(const std::string& peer, const wire::Message& request, const PushContents& push,
            std::vector<Outgoing>* out) override;

 private:
  UpdateShard* shard_;
};

}  // namespace ps
}  // namespace pstrain
