// What a parameter server counts about its traffic and work: the totals its log prints at the
// end and its TensorBoard scalars are made of (ps/server_summary.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace pstrain {
namespace ps {

// Counted on the server's thread as requests are handled (plain integers: one thread writes
// them); ps/server_summary.h turns their growth over an interval into TensorBoard scalars.
struct ServerStats {
  int64_t pushes = 0, pulls = 0, updates = 0, dropped_stale = 0, rejected = 0, duplicates = 0;
  int64_t refused = 0;                  // not the sender's to make (its key, role or incarnation)
  int64_t scaled_outliers = 0;          // pushes scaled down as outliers (ps/magnitude_guard.h)
  // Tensor bytes received in requests and sent in replies, on the wire (2 a bfloat16 element).
  int64_t bytes_in = 0, bytes_out = 0;
  int64_t apply_nanos = 0;              // in the optimizer (and copy-on-write), all updates
  // Replication (docs/replication.md): records and copies sent down the chain, and their
  // tensor bytes.
  int64_t records_replicated = 0, copies_sent = 0, bytes_replicated = 0;
  // Updates between the step a taken push was computed from and its arrival, summed.
  int64_t staleness_sum = 0, staleness_samples = 0;
  // Embedding-table rows held now, over every table (a gauge, not a total).
  int64_t table_rows = 0;

  // Every field summed (a task's shards into its totals); a new field is added here too.
  ServerStats& operator+=(const ServerStats& s) {
    pushes += s.pushes;
    pulls += s.pulls;
    updates += s.updates;
    dropped_stale += s.dropped_stale;
    rejected += s.rejected;
    duplicates += s.duplicates;
    refused += s.refused;
    scaled_outliers += s.scaled_outliers;
    bytes_in += s.bytes_in;
    bytes_out += s.bytes_out;
    apply_nanos += s.apply_nanos;
    records_replicated += s.records_replicated;
    copies_sent += s.copies_sent;
    bytes_replicated += s.bytes_replicated;
    staleness_sum += s.staleness_sum;
    staleness_samples += s.staleness_samples;
    table_rows += s.table_rows;
    return *this;
  }
};

// The highest values since the summary last took them (ParameterServer::TakeHighs).
struct ServerHighs {
  int64_t apply_nanos = 0;  // one update's
  int64_t staleness = 0;    // one taken push's
  size_t pending = 0;       // requests held for a later reply, after any request
};

}  // namespace ps
}  // namespace pstrain
