// The row pushes of one accumulate or sync window (--update_mode, ps/update_mode.h), as the
// dense pushes of a window are summed by GradientAccumulator: each table's gradient rows summed
// per id over the window's pushes, so that the window's update is their mean over the window's
// pushes, as the dense update is (and as TensorFlow's sparse conditional accumulator averages
// over the gradients it took). A row in few of a window's batches gets its sum divided by all
// of them. Pushes without ids are not sent, so the divisor is the dense window's count when
// that is larger.
//
// Memory is bounded by each table's max_rows: a push that would make a table's window hold more
// distinct ids than that is refused, changing nothing.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"

namespace pstrain::ps {

class RowWindow {
 public:
  // One table's window, taken: its distinct ids in first-pushed order, the mean of their rows
  // over the window's pushes [ids, dimension], and how many pushes there were.
  struct Mean {
    std::vector<int64_t> ids;
    Tensor rows;
    int64_t pushes = 0;
  };

  // Adds a push of `grads` [ids.size(), dimension] (checked by the caller) to `table`'s window;
  // ResourceExhausted, changing nothing, when the window would hold more than `max_ids` ids.
  Status Add(const std::string& table, const std::vector<int64_t>& ids, const Tensor& grads,
             int64_t max_ids);
  bool empty() const { return tables_.empty(); }
  // The global step the open window's first push came at (meaningful when not empty).
  int64_t opened_at() const { return opened_at_; }
  void set_opened_at(int64_t step) { opened_at_ = step; }
  // Every table's mean over max(its pushes, `window_pushes`), and the window emptied.
  std::map<std::string, Mean> Take(int64_t window_pushes);

 private:
  struct Sums {
    std::unordered_map<int64_t, int64_t> position;  // id -> its row in `sums`
    std::vector<int64_t> ids;
    std::vector<float> sums;
    int64_t dimension = 0;
    int64_t pushes = 0;
  };
  std::map<std::string, Sums> tables_;
  int64_t opened_at_ = 0;
};

}  // namespace pstrain::ps
