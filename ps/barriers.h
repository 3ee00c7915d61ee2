// A server's barriers: named waits of the cluster's participants (every worker, the chief as
// worker 0, and every evaluator), each released when all it waits for have arrived. The count
// is the server's own (ClusterSize: --worker_hosts, --evaluators), never a request's: a sender
// that could name it would release the final barrier while others still train. With
// --min_workers the live workers count instead (ps/membership.h), which the caller decides.
//
// A participant that asks again at a barrier (a retry, or a restarted process) counts once
// there. Its waits at other barriers stay: a wait is moved only by asking at the same barrier,
// so a request under the same key elsewhere cannot cancel the real process's wait. At most
// kMaxBarriersPerParticipant waits are held per participant (a real process waits at one).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/wire/message.h"
#include "ps/permissions.h"

namespace pstrain {
namespace ps {

// The barriers one participant may wait at together (a process waits at one at a time; the
// bound keeps a key from holding the server's memory with waits at invented names).
constexpr int kMaxBarriersPerParticipant = 4;

class Barriers {
 public:
  struct Wait {
    std::string peer;  // the connection to answer
    wire::Message request;
  };
  // Whether the waits at one barrier are all it waits for.
  using Complete = std::function<bool(const std::vector<Wait>&)>;

  // `elastic`: the live workers count (--min_workers), so a request's count is not checked.
  Barriers(ClusterSize cluster, bool elastic) : cluster_(cluster), elastic_(elastic) {}

  // Records `request`'s wait at its barrier (`text`), after checking it; the waits it releases
  // (the barrier's, this one included), or none yet.
  Result<std::vector<Wait>> Arrive(const std::string& peer, const wire::Message& request,
                                   const Complete& complete);
  // The waits of every barrier that `complete` now finds complete (the live workers changed).
  std::vector<Wait> ReleaseComplete(const Complete& complete);
  // Every wait, removed (this shard stopped being its chain's head).
  std::vector<Wait> TakeAll();
  size_t waiting() const;
  // Whether the cluster's count holds for `waiting` (the fixed-N rule; elastic callers count
  // live workers instead).
  bool FixedCountReached(const std::vector<Wait>& waiting) const;

  // "worker 0" for the chief too: one process, whichever role its header names.
  static std::string Participant(const wire::Message& m);

 private:
  Status Check(const wire::Message& request) const;

  ClusterSize cluster_;
  bool elastic_;
  std::map<std::string, std::vector<Wait>> by_name_;
};

}  // namespace ps
}  // namespace pstrain
