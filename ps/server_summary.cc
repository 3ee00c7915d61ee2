#include "ps/server_summary.h"

#include <algorithm>

#include "common/process_memory.h"

namespace pstrain {
namespace ps {

Result<std::unique_ptr<ServerSummary>> ServerSummary::Open(const std::string& logdir,
                                                           int task_index, double every_secs,
                                                           Clock::time_point start) {
  if (!(every_secs > 0)) {
    return InvalidArgument("--ps_summary_secs must be > 0 to write summaries, got " +
                           std::to_string(every_secs));
  }
  SummaryWriterOptions options;
  // Each interval's scalars reach the file within the next interval, from the writer's thread.
  options.flush_secs = std::min(every_secs, 10.0);
  ASSIGN_OR_RETURN(std::unique_ptr<SummaryWriter> writer,
                   SummaryWriter::Open(logdir, Subdir(task_index), options));
  const auto every =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(every_secs));
  return std::unique_ptr<ServerSummary>(new ServerSummary(std::move(writer), every, start));
}

ServerSummary::ServerSummary(std::unique_ptr<SummaryWriter> writer, Clock::duration every,
                             Clock::time_point start)
    : writer_(std::move(writer)), every_(every), last_(start), next_(start + every) {}

void ServerSummary::Write(const ServerStats& now_stats, const ServerHighs& highs, int64_t step,
                          size_t pending, Clock::time_point now) {
  const ServerStats& a = last_stats_;
  const ServerStats& b = now_stats;
  // An interval shorter than a millisecond (a write at shutdown right after the last) would
  // turn a handful of requests into huge rates.
  const double secs = std::max(1e-3, std::chrono::duration<double>(now - last_).count());
  auto rate = [&](int64_t from, int64_t to) { return static_cast<float>((to - from) / secs); };
  auto add = [&](const char* tag, double value) {
    writer_->AddScalar(tag, step, static_cast<float>(value));
  };
  add("ps/pushes_per_sec", rate(a.pushes, b.pushes));
  add("ps/pulls_per_sec", rate(a.pulls, b.pulls));
  add("ps/updates_per_sec", rate(a.updates, b.updates));
  add("ps/bytes_in_per_sec", rate(a.bytes_in, b.bytes_in));
  add("ps/bytes_out_per_sec", rate(a.bytes_out, b.bytes_out));
  const int64_t updates = b.updates - a.updates;
  add("ps/apply_ms", updates > 0 ? (b.apply_nanos - a.apply_nanos) * 1e-6 / updates : 0.0);
  add("ps/apply_ms_max", highs.apply_nanos * 1e-6);
  add("ps/pending_requests", static_cast<double>(pending));
  add("ps/pending_requests_max", static_cast<double>(std::max(highs.pending, pending)));
  const int64_t samples = b.staleness_samples - a.staleness_samples;
  add("ps/staleness",
      samples > 0 ? static_cast<double>(b.staleness_sum - a.staleness_sum) / samples : 0.0);
  add("ps/staleness_max", static_cast<double>(highs.staleness));
  add("ps/dropped_stale", static_cast<double>(b.dropped_stale - a.dropped_stale));
  add("ps/refused", static_cast<double>(b.refused - a.refused));
  add("ps/rejected", static_cast<double>(b.rejected - a.rejected));
  add("ps/scaled_outliers", static_cast<double>(b.scaled_outliers - a.scaled_outliers));
  add("ps/table_rows", static_cast<double>(b.table_rows));
  add("ps/memory_mb", static_cast<double>(ResidentBytes()) / (1 << 20));
  add("ps/pushes_total", static_cast<double>(b.pushes));
  add("ps/pulls_total", static_cast<double>(b.pulls));
  add("ps/bytes_in_total", static_cast<double>(b.bytes_in));
  add("ps/bytes_out_total", static_cast<double>(b.bytes_out));
  if (b.records_replicated > 0) {  // a shard with a chain (docs/replication.md)
    add("ps/bytes_replicated_total", static_cast<double>(b.bytes_replicated));
    add("ps/records_replicated_total", static_cast<double>(b.records_replicated));
  }
  last_stats_ = b;
  last_ = now;
  // On a steady beat; after a late write (a long request), the next interval is a whole one.
  next_ += every_;
  if (next_ <= now) next_ = now + every_;
}

Status ServerSummary::Close() { return writer_->Close(); }

}  // namespace ps
}  // namespace pstrain
