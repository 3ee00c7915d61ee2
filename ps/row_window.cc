#include "ps/row_window.h"

#include <algorithm>

namespace pstrain::ps {

Status RowWindow::Add(const std::string& table, const std::vector<int64_t>& ids,
                      const Tensor& grads, int64_t max_ids) {
  if (ids.empty()) return Status::OK();
  const int64_t d = ids.empty() ? 0 : grads.size() / static_cast<int64_t>(ids.size());
  auto found = tables_.find(table);
  if (found != tables_.end() && found->second.dimension != d) {
    return InvalidArgument("table '" + table + "': rows of " + std::to_string(d) +
                           " floats in a window of rows of " +
                           std::to_string(found->second.dimension));
  }
  int64_t fresh = 0;
  std::unordered_map<int64_t, bool> seen;
  for (int64_t id : ids) {
    const bool held = found != tables_.end() && found->second.position.count(id);
    if (!held && seen.emplace(id, true).second) ++fresh;
  }
  const int64_t held = found == tables_.end() ? 0 : static_cast<int64_t>(found->second.ids.size());
  if (held + fresh > max_ids) {
    return ResourceExhausted("table '" + table + "': this window already sums " +
                             std::to_string(held) + " rows and the push adds " +
                             std::to_string(fresh) + ", over max_rows " + std::to_string(max_ids));
  }
  Sums& s = tables_[table];
  s.dimension = d;
  ++s.pushes;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto [it, added] = s.position.emplace(ids[i], static_cast<int64_t>(s.ids.size()));
    if (added) {
      s.ids.push_back(ids[i]);
      s.sums.resize(s.sums.size() + d, 0.0f);
    }
    float* into = s.sums.data() + it->second * d;
    const float* g = grads.data() + static_cast<int64_t>(i) * d;
    for (int64_t k = 0; k < d; ++k) into[k] += g[k];
  }
  return Status::OK();
}

std::map<std::string, RowWindow::Mean> RowWindow::Take(int64_t window_pushes) {
  std::map<std::string, Mean> out;
  for (auto& [table, s] : tables_) {
    Mean& m = out[table];
    m.pushes = s.pushes;
    const float scale = 1.0f / static_cast<float>(std::max(s.pushes, window_pushes));
    for (float& v : s.sums) v *= scale;
    m.rows = Tensor::FromVector(Shape{static_cast<int64_t>(s.ids.size()), s.dimension}, s.sums);
    m.ids = std::move(s.ids);
  }
  tables_.clear();
  return out;
}

}  // namespace pstrain::ps
