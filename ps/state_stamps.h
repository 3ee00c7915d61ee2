// The head's stamps of a shard's state, and a joiner's check of its copy against them
// (docs/replication.md section 5). The head's tags (record_tag.h) vouch for every record, but a
// joiner's copy is made by the chain's tail: whoever holds the tail's key could hand the joiner
// altered values, slots or step, and the joiner would diverge silently. So, while its map lists
// a joiner for the shard, the head puts into a record, at most once a second, the digest of the
// shard's state after it (state_digest.h, StateBlake2b), which its tags cover, and makes an
// empty record to carry one when no update comes. A joiner that installed a copy is unverified
// until the first stamped record after it: after applying that record it compares its own
// digest. Equal: verified. Different: the copy was forged or broken, and the joiner drops it,
// to be copied again. Until it is verified, a joiner acknowledges no record past its copy, so
// the tail never finds it caught up and the chief never makes it a member. Any other replica
// compares too, as a free check that it has not diverged.
//
// Plain data and a clock; ParameterServer (ps/server_copy_check.cc) computes the digests.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace pstrain {
namespace ps {

class StateStamps {
 public:
  using Clock = std::chrono::steady_clock;

  // The head: whether a record made now carries a stamp (a joiner is listed and a second has
  // passed since the last stamp), and that one was made.
  bool Due(bool joiner_listed, Clock::time_point now) const;
  void Stamped(Clock::time_point now) { last_stamp_ = now; }

  // A copy of record `sequence` from task `from` was installed: unverified until a stamp.
  void CopyInstalled(int from, int64_t sequence);
  // The copy was dropped (found wrong): nothing to verify until the next one.
  void CopyDropped() { copy_.reset(); }
  bool unverified() const { return copy_.has_value(); }
  int copy_from() const { return copy_ ? copy_->from : -1; }
  int64_t copy_sequence() const { return copy_ ? copy_->sequence : -1; }
  // The highest record a joiner acknowledges when `committed` is applied here: its copy's
  // while unverified.
  int64_t Acknowledgeable(int64_t committed, bool joiner) const;

  enum class Verdict {
    kAgrees,      // a replica whose state matches the stamp
    kVerified,    // a joiner's copy found right: it may be caught up now
    kForgedCopy,  // a joiner's copy found wrong: drop it
    kDiverged,    // a replica not verifying a copy differs from its head: log it loudly
  };
  // A stamped record was applied here: `stamp` is the head's digest, `own` this replica's.
  Verdict Compare(const std::string& stamp, const std::string& own);

 private:
  struct Copy {
    int from;
    int64_t sequence;
  };
  std::optional<Copy> copy_;
  std::optional<Clock::time_point> last_stamp_;
};

}  // namespace ps
}  // namespace pstrain
