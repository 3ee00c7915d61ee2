// One row push per row pull, the rows' form of the dense path's one step per pull
// (ps/peer_state.h). A worker's row push to a table is let in only if that worker's process
// pulled rows of that table for training from this server since, and only if every id it pushes
// was named by one such pull; the push uses that pull up. So a worker's key moves a row only by
// the round trip a real step makes, and only the rows a pull of its named, never spinning a
// table's rows at will. A sender's first row push to each table of this server is let in once (a
// server that restarted, or a backup that has just become its shard's head, has not seen the
// pull it follows; a worker's step pushes to every table at once): once per sender and table, not
// per process, so that a key minting a new incarnation per request gets no push without a pull,
// and at most one per table of the config.
//
// Memory per sender is bounded: at most kMaxOpenPulls pulls per table are kept open, the oldest
// forgotten first, and a pull holds no more ids than the wire let it carry.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"

namespace pstrain::ps {

class RowPullLedger {
 public:
  static constexpr size_t kMaxOpenPulls = 4;

  // `sender` ("worker 1") of process `incarnation` pulled `ids` of `table` for training. Another
  // incarnation than the one noted before drops the older process's open pulls.
  void NotePull(const std::string& sender, uint64_t incarnation, const std::string& table,
                const std::vector<int64_t>& ids);
  // Whether `sender`'s push of `ids` to `table` may go on: PermissionDenied naming the sender
  // and the table (and the first id no open pull named) when not. Changes nothing.
  Status MayPush(const std::string& sender, uint64_t incarnation, const std::string& table,
                 const std::vector<int64_t>& ids) const;
  // A push MayPush let in was taken (applied, or dropped as stale): its pull is used up.
  void NotePush(const std::string& sender, uint64_t incarnation, const std::string& table,
                const std::vector<int64_t>& ids);

 private:
  struct Sender {
    uint64_t incarnation = 0;
    std::set<std::string> pushed;  // tables its first push to was taken (by any of its processes)
    // Per table, the open pulls' ids, each sorted without repeats, oldest first.
    std::map<std::string, std::deque<std::vector<int64_t>>> open;
  };
  // The sender's entry, its open pulls dropped when `incarnation` is another process's.
  Sender& Opened(const std::string& sender, uint64_t incarnation);
  // The first open pull of `table` naming every id of `ids` (sorted), or -1.
  static int Covering(const Sender& s, const std::string& table, const std::vector<int64_t>& ids);
  std::map<std::string, Sender> senders_;
};

}  // namespace pstrain::ps
