// One shard's place in its chain, as chain replication keeps it (docs/replication.md sections
// 3-5): which task precedes and follows this one in the map of the current epoch, the records
// applied here that the rest of the chain has not yet acknowledged (kept to send again to a new
// successor, so that a failure in the middle of the chain loses none), the replies that
// wait for a record to be acknowledged, and the joiners a tail copies to.
//
// Records are numbered by the shard (`sequence`, contiguous from the last initialisation); a
// record also says the shard's global step after it (`value`), since a stale drop, an assign or
// one part of an async step is a record that is no step. Acknowledgements are cumulative: one
// connection per successor keeps order. Each record carries the chain's link before it and moves
// it on (common/wire/chain_link.h): a record is taken only if it follows from those before it
// here. The state is plain data; ParameterServer (ps/server.h,
// ps/server_replication.cc) applies the records and sends what this class says to send.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/wire/chain_link.h"
#include "common/wire/message.h"

namespace pstrain {
namespace ps {

// A reply waiting for a record to be acknowledged: a worker's (push, or sync mode's pull) on a
// head, or a predecessor's replicate on a middle replica (`ack`: its `sequence` is set to the
// record acknowledged when it leaves).
struct HeldReply {
  std::string peer;
  wire::Message message;
  bool ack = false;
};

class ReplicaChain {
 public:
  // The chain of map `epoch`: `tasks` head first, `joining` copying behind the tail.
  struct View {
    uint64_t epoch = 0;
    std::vector<int> tasks;
    std::vector<int> joining;
    int self = -1;
  };

  // Whether a map has been set (epoch 0: no chain, an unreplicated server).
  bool active() const { return view_.epoch > 0; }
  uint64_t epoch() const { return view_.epoch; }
  const View& view() const { return view_; }
  bool head() const { return active() && !view_.tasks.empty() && view_.tasks[0] == view_.self; }
  bool member() const { return position() >= 0; }
  bool joiner() const;
  bool tail() const { return member() && position() + 1 == static_cast<int>(view_.tasks.size()); }
  int head_task() const { return view_.tasks.empty() ? -1 : view_.tasks[0]; }
  // The task whose records this one takes (a member's predecessor, a joiner's tail); -1: none.
  int predecessor() const;
  // The member after this one; -1 for the tail.
  int successor() const { return tail() || !member() ? -1 : view_.tasks[position() + 1]; }

  // What taking a newer view changes here.
  struct Change {
    bool lost_head = false;        // was head, is no longer: held worker replies are aborted
    bool new_successor = false;    // the unacknowledged records go to it again
    bool new_predecessor = false;  // a joiner whose tail changed waits for a new copy
    bool became_head = false;      // a backup promoted (it logs its first update as head)
  };
  // Takes `view` if its epoch is newer than the current one (false: kept the current one).
  bool Set(const View& view, Change* change);

  // After an initialisation, a restore or an installed copy: `records` applied, the shard at
  // `step`, all of it acknowledged (nothing is in flight). `link`: an installed copy's; empty
  // keeps this chain's (a head's own, drawn at random when this object was made).
  void Reset(int64_t records, int64_t step, const std::string& link = {});
  // The link a next record must carry: the link after the last record applied here.
  const std::string& link() const { return link_; }
  int64_t records() const { return records_; }
  int64_t committed() const { return committed_; }
  // The shard's global step after the last acknowledged record (what replies report).
  int64_t committed_step() const { return committed_step_; }

  // A record applied here (its sequence is records() + 1, its link link()): kept until
  // acknowledged, and the link moved on. Returns the tasks to send it to: the successor, or as
  // tail every joiner that has its copy.
  std::vector<int> Append(const wire::Message& record);
  // The records not yet acknowledged, oldest first (sent again to a new successor).
  const std::deque<wire::Message>& unacknowledged() const { return log_; }

  void Hold(int64_t sequence, HeldReply reply) { held_.emplace(sequence, std::move(reply)); }
  // A record sent again (a predecessor's new successor is this task; sequence <= records()):
  // held as `ack` until the chain holds it, once per sequence however often it comes. One this
  // replica still logs must carry the link of the record it holds there (FailedPrecondition
  // otherwise, nothing held); an older one is acknowledged already and changes nothing.
  Status HoldResent(int64_t sequence, const std::string& link, HeldReply ack);
  size_t held() const { return held_.size(); }
  // Every held reply, for an answer that is no longer this task's to give.
  std::vector<HeldReply> TakeAllHeld();

  // `from` acknowledges every record up to `sequence` (an old or unknown sender's is ignored).
  void Acknowledged(int from, int64_t sequence);
  // Commits what the acknowledgements allow (everything when none is required) and returns the
  // replies that were waiting for it. `step`: the shard's global step now.
  std::vector<HeldReply> Advance(int64_t step);

  // Joiners (tail only): which have been sent a copy, which still need one, which caught up: a
  // joiner is caught up once it acknowledges this tail's latest record, and a record after its
  // copy (which it acknowledges only once the head's stamp has verified the copy:
  // ps/state_stamps.h).
  std::vector<int> JoinersToCopy() const;
  void CopySent(int joiner, std::chrono::steady_clock::time_point now);
  // A joiner that refused its copy (another train config): no records go to it.
  void CopyRefused(int joiner);
  // Joiner `from` answered that it lacks the copy (a restarted process, a copy lost, or one
  // sent before its task had the map): true when it is to be copied again, at most once a
  // second (a copy is the whole shard), else at the next map.
  bool JoinerLacksCopy(int from, std::chrono::steady_clock::time_point now);
  std::vector<int> CaughtUpJoiners() const;

  // True once after this task became head with a record made: the failover's end, logged.
  bool TakeFirstAsHead() { return std::exchange(first_as_head_, false); }

 private:
  int position() const;
  struct Joiner {
    bool copied = false, refused = false, caught_up = false;
    bool copy_acked = false;  // its copy is installed
    int64_t acked = 0;
    int64_t copy_record = 0;  // the record its copy was taken at
    std::chrono::steady_clock::time_point copied_at;
  };
  View view_;
  int64_t records_ = 0;
  int64_t committed_ = 0;
  int64_t committed_step_ = 0;
  int64_t successor_acked_ = 0;
  std::deque<wire::Message> log_;  // sequence > committed_, oldest first; tensors shared
  std::multimap<int64_t, HeldReply> held_;
  std::map<int, Joiner> joiners_;  // by task (tail only)
  bool first_as_head_ = false;
  std::string link_ = wire::NewChainLink();
};

}  // namespace ps
}  // namespace pstrain
