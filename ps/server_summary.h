// Each parameter server's own TensorBoard scalars, in <logdir>/ps-<task>: TensorBoard shows the
// servers as runs side by side, so an overloaded shard stands out without measuring traffic by
// hand (TensorFlow's PS runtime shows only the chief; see TF issue 24953). Every interval it
// writes what the server did in it, as rates, means and highs, plus running totals:
//
//   ps/pushes_per_sec  ps/pulls_per_sec  ps/updates_per_sec
//   ps/bytes_in_per_sec  ps/bytes_out_per_sec    tensor bytes of requests and replies, as they
//                                                travelled (half with --push_dtype=bf16)
//   ps/apply_ms  ps/apply_ms_max                 one update in the optimizer: mean, highest
//   ps/pending_requests  ps/pending_requests_max held for a later reply: now, highest
//   ps/staleness  ps/staleness_max               updates a taken gradient is behind: mean, highest
//   ps/dropped_stale  ps/refused  ps/rejected    in the interval (counts, not rates)
//   ps/scaled_outliers                           pushes scaled down as outliers, in the interval
//   ps/pushes_total  ps/pulls_total  ps/bytes_in_total  ps/bytes_out_total
//   ps/table_rows  ps/memory_mb                  embedding rows held now (every table) and the
//                                                process's resident memory, MiB
//
// The step is the server's global step, as the workers' scalars use it. The server counts on
// its own thread (ps/server_stats.h); this only takes differences, every few seconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "common/summary/summary_writer.h"
#include "ps/server_stats.h"

namespace pstrain {
namespace ps {

class ServerSummary {
 public:
  using Clock = std::chrono::steady_clock;

  // Opens <logdir>/ps-<task_index> for scalars every `every_secs` (> 0), the first interval
  // starting at `start`.
  static Result<std::unique_ptr<ServerSummary>> Open(const std::string& logdir, int task_index,
                                                     double every_secs, Clock::time_point start);

  static std::string Subdir(int task_index) { return "ps-" + std::to_string(task_index); }

  bool Due(Clock::time_point now) const { return now >= next_; }
  // Writes the interval from the last write (or the start) to `now`: `stats` are the server's
  // totals now, `highs` its highs in the interval, `pending` the requests it holds now.
  void Write(const ServerStats& stats, const ServerHighs& highs, int64_t step, size_t pending,
             Clock::time_point now);
  // Writes what is queued to the file and closes it.
  Status Close();
  const std::string& path() const { return writer_->path(); }

 private:
  ServerSummary(std::unique_ptr<SummaryWriter> writer, Clock::duration every,
                Clock::time_point start);

  std::unique_ptr<SummaryWriter> writer_;
  Clock::duration every_;
  Clock::time_point last_, next_;
  ServerStats last_stats_;
};

}  // namespace ps
}  // namespace pstrain
