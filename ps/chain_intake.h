// Which replication requests (records and replica copies) a shard takes from the chain, before
// it looks inside one: a request for this shard from its predecessor in this task's map. One
// sent under a newer map than this task has waits here until that map arrives (maps reach the
// tasks one after another, so a sender may be a few epochs ahead), within bounds: a sender that
// ignores the map cannot fill this task's memory. ParameterServer (ps/server_replication.cc)
// applies what is taken.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/wire/message.h"
#include "ps/replica_chain.h"

namespace pstrain {
namespace ps {

class ChainIntake {
 public:
  explicit ChainIntake(int shard) : shard_(shard) {}

  enum class Verdict {
    kTake,    // from the predecessor: check the record itself next
    kWait,    // kept until this task has the request's map
    kRefuse,  // answered with the error given
  };
  // What becomes of `request` from the connection `peer`, given this shard's `chain`; a refusal
  // sets `*why` (naming the shard, the epochs and the sender).
  Verdict Check(const ReplicaChain& chain, const std::string& peer, const wire::Message& request,
                Status* why);

  struct Waiting {
    std::string peer;
    wire::Message request;
  };
  // The requests that waited for a newer map, oldest first; none wait afterwards.
  std::vector<Waiting> TakeWaiting();
  size_t waiting() const { return waiting_.size(); }

 private:
  int shard_;
  std::vector<Waiting> waiting_;
};

}  // namespace ps
}  // namespace pstrain
