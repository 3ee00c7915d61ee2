// Writes TensorBoard event files: <logdir>/<subdir>/events.out.tfevents.<secs>.<hostname>,
// TFRecord-framed tensorflow.Event protos starting with file_version "brain.Event:2".
//
// Summaries are diagnostics, so the Add* calls never fail training: they serialize in the
// caller's thread, queue the record, and return; bad arguments and write errors are logged.
// A background thread writes the queue out every flush_secs. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/record_io.h"
#include "common/status.h"
#include "common/tensor.h"

namespace tensorflow {
class GraphDef;
}

namespace pstrain {

struct SummaryWriterOptions {
  // How often queued events reach the file (and TensorBoard), in seconds.
  double flush_secs = 10.0;
  // Queued events that wake the background thread to write early (TF's FileWriter max_queue).
  size_t max_queue = 64;
};

class SummaryWriter {
 public:
  // Creates <logdir>/<subdir> (subdir may be empty) and a new event file in it. If a file of
  // that name already exists (two writers in the same second) ".1", ".2"... is appended rather
  // than overwriting it.
  static Result<std::unique_ptr<SummaryWriter>> Open(const std::string& logdir,
                                                     const std::string& subdir = "",
                                                     const SummaryWriterOptions& options = {});
  ~SummaryWriter();  // Close()
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  // A float32 simple_value, as TF's scalar summaries write it.
  void AddScalar(const std::string& tag, int64_t step, float value);
  // TF's HistogramProto with default buckets (see histogram.h); NaN/Inf values are left out.
  void AddHistogram(const std::string& tag, int64_t step, const float* values, int64_t n);
  void AddHistogram(const std::string& tag, int64_t step, const Tensor& values);
  // The first max_images of an [N,C,H,W] batch (C 1 or 3) as PNGs, each min-max scaled to
  // 0..255 (image_encoding.h). Tags are "<tag>/image/<i>", or "<tag>/image" when max_images
  // is 1, as TF's image summary names them. One event holds all of them.
  void AddImages(const std::string& tag, int64_t step, const Tensor& images, int max_images = 3);
  // A DT_STRING scalar tensor for TensorBoard's text plugin, which renders it as markdown.
  void AddText(const std::string& tag, int64_t step, const std::string& text);
  // The model's graph for the Graphs tab (graph_def.h), as tf.summary.FileWriter(logdir, graph)
  // writes it: an Event whose graph_def holds the serialized GraphDef. Write it once per run;
  // TensorBoard shows the last one it reads.
  void AddGraph(const tensorflow::GraphDef& graph);

  // Writes queued events to the file and the file to the OS. Returns the first write error
  // this writer met (after which it drops events), or OK.
  Status Flush();
  // Flushes, stops the background thread and closes the file. Later Add* calls are dropped.
  Status Close();

  const std::string& path() const { return path_; }

 private:
  SummaryWriter(RecordWriter file, const SummaryWriterOptions& options);
  void Enqueue(std::string event);
  // Writes out the queue; flushes to the OS too.
  void WriteQueued();
  void FlushLoop();

  const std::string path_;
  const SummaryWriterOptions options_;

  // Lock order: file_mu_ before queue_mu_. Adders take only queue_mu_, so they never wait for
  // the disk.
  std::mutex file_mu_;
  RecordWriter file_;    // guarded by file_mu_
  Status write_status_;  // guarded by file_mu_; the first write error

  std::mutex queue_mu_;
  std::condition_variable wake_;
  std::vector<std::string> queue_;  // guarded by queue_mu_; serialized Events
  bool closing_ = false;            // guarded by queue_mu_

  std::mutex close_mu_;
  bool closed_ = false;  // guarded by close_mu_
  std::thread flusher_;
};

}  // namespace pstrain
