// The host hub's protocol without its socket, so that tests and the fuzzer drive it directly:
// the rendezvous store's sets and gets, and collectives gathered from every rank, checked,
// computed in rank order and answered (see host_hub.h). Every request gets a reply; a malformed
// or inconsistent one gets an error naming what was wrong, and nothing crashes the hub. Ranks
// heartbeat it; a rank that falls silent fails the collectives it has not joined.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/wire/message.h"
#include "worker/distributed/collectives/collectives.h"
#include "worker/distributed/collectives/rendezvous_store.h"

namespace pstrain {

struct HostHubOptions {
  int size = 1;  // ranks in the group; a collective completes when all have called it
  // A collective that some rank has not joined this long after the first did fails, for the
  // ranks that came, with Unavailable naming the missing ranks.
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  // A rank that heartbeated and then fell silent this long is dead: the collectives it has not
  // joined fail at once, naming it.
  std::chrono::milliseconds rank_silence_limit{5000};
  // With CURVE: the key name of each rank ("worker-3" for rank 1 of workers [2, 3]); a request
  // naming a rank whose key is not the connection's is refused. Empty in plaintext.
  std::vector<std::string> rank_keys;
};

class HubState {
 public:
  // What one group may hold at once, whatever its ranks send: ranks call collectives in order,
  // so a few are pending at a time, and the rendezvous needs a handful of keys.
  static constexpr size_t kMaxPendingCalls = 64;
  static constexpr size_t kMaxStoreKeys = 4096;

  using Clock = std::chrono::steady_clock;
  struct Outgoing {
    std::string peer;  // the routing id to reply to
    wire::Message message;
  };

  explicit HubState(const HostHubOptions& options);

  // The replies `request` from `peer`, authenticated as `identity` (its CURVE key's name; empty
  // in plaintext), causes now (none while a collective waits for others).
  std::vector<Outgoing> Handle(const std::string& peer, wire::Message request,
                               Clock::time_point now, const std::string& identity = "");
  // The error replies to collectives some rank has not joined within the timeout.
  std::vector<Outgoing> Expire(Clock::time_point now);

 private:
  struct Contribution {
    std::string peer;
    wire::Message request;
    CollectiveCall call;
  };
  struct Pending {
    std::vector<std::unique_ptr<Contribution>> ranks;  // by rank; null until it arrives
    int arrived = 0;
    Clock::time_point first;
  };

  wire::Message AnswerStore(const wire::Message& m);
  void Heartbeat(const std::string& peer, const wire::Message& m, Clock::time_point now);
  // A rank seen with a new process id restarted: the group is broken for good.
  void NoteIncarnation(int rank, uint64_t incarnation);
  // Files a rank's contribution; completes the collective once every rank's is in.
  void Collect(const std::string& peer, wire::Message m, Clock::time_point now);
  // Checks and computes a complete collective and replies to every rank.
  void Complete(int64_t number, Pending& p);
  void FailAll(Pending& p, const Status& status);
  void ReplyTo(const std::string& peer, const wire::Message& reply);

  HostHubOptions options_;
  std::shared_ptr<InMemoryStoreTable> table_ = std::make_shared<InMemoryStoreTable>();
  InMemoryStore store_;
  std::map<int64_t, Pending> pending_;         // by call number
  std::vector<uint64_t> incarnations_;         // each rank's process, once seen (0: not yet)
  std::vector<Clock::time_point> last_heard_;  // each rank's last heartbeat (epoch: never)
  Status broken_;                              // set once a rank restarted: the group must restart
  std::vector<Outgoing> out_;                  // the replies of the call in progress
};

}  // namespace pstrain
