#include "ps/row_pull_ledger.h"

#include <algorithm>

namespace pstrain::ps {
namespace {

std::vector<int64_t> SortedUnique(std::vector<int64_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace

void RowPullLedger::NotePull(const std::string& sender, uint64_t incarnation,
                             const std::string& table, const std::vector<int64_t>& ids) {
  Sender& s = Opened(sender, incarnation);
  std::deque<std::vector<int64_t>>& open = s.open[table];
  if (open.size() == kMaxOpenPulls) open.pop_front();
  open.push_back(SortedUnique(ids));
}

RowPullLedger::Sender& RowPullLedger::Opened(const std::string& sender, uint64_t incarnation) {
  Sender& s = senders_[sender];
  if (s.incarnation != incarnation) {  // another process: its own pulls, but no free push again
    s.incarnation = incarnation;
    s.open.clear();
  }
  return s;
}

int RowPullLedger::Covering(const Sender& s, const std::string& table,
                            const std::vector<int64_t>& ids) {
  auto it = s.open.find(table);
  if (it == s.open.end()) return -1;
  for (size_t i = 0; i < it->second.size(); ++i) {
    const std::vector<int64_t>& pulled = it->second[i];
    if (std::includes(pulled.begin(), pulled.end(), ids.begin(), ids.end())) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

Status RowPullLedger::MayPush(const std::string& sender, uint64_t incarnation,
                              const std::string& table, const std::vector<int64_t>& ids) const {
  auto it = senders_.find(sender);
  // The sender's first row push to this table here, once (whatever its process), unless that
  // process has pulls of the table open here: then they decide.
  if (it == senders_.end()) return Status::OK();
  const Sender& s = it->second;
  const bool own = s.incarnation == incarnation;
  const bool pulled = own && s.open.count(table) && !s.open.at(table).empty();
  if (!s.pushed.count(table) && !pulled) return Status::OK();
  if (own && Covering(s, table, SortedUnique(ids)) >= 0) return Status::OK();
  return PermissionDenied(sender + "'s row push to table '" + table +
                          "' follows no row pull of its ids from this server since its last "
                          "row push there: one row push per pull, of the rows pulled");
}

void RowPullLedger::NotePush(const std::string& sender, uint64_t incarnation,
                             const std::string& table, const std::vector<int64_t>& ids) {
  Sender& s = Opened(sender, incarnation);
  s.pushed.insert(table);
  const int i = Covering(s, table, SortedUnique(ids));
  if (i < 0) return;  // the first push, let in without a pull
  std::deque<std::vector<int64_t>>& open = s.open[table];
  open.erase(open.begin() + i);
}

}  // namespace pstrain::ps
