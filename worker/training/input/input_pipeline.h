// The worker's input pipeline: background threads read this worker's share of the data,
// shuffle it, decode and preprocess it into batches, and keep `prefetch_batches` of them ready
// so that the trainer does not wait on input.
//
//   ASSIGN_OR_RETURN(auto input, InputPipeline::Create(options, 128, task_index, num_workers,
//                                                      seed));
//   ASSIGN_OR_RETURN(Batch batch, input->Next());
//
// Evaluation: Create(options.ForEvaluation(), ...) and call Next() until OutOfRange.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "worker/training/input/example_source.h"
#include "worker/training/input/input_options.h"
#include "worker/training/input/leased_source.h"
#include "worker/training/input/ordered_queue.h"
#include "worker/training/input/preprocess.h"
#include "worker/training/input/shuffle_buffer.h"

namespace pstrain {

struct Batch {
  Tensor images;  // [N, C, H, W] float32
  std::vector<int32_t> labels;
  int64_t epoch = 0;  // counted from 0
  // Elastic data (InputOptions::lease): the chunk uses of this batch's examples, for the step's
  // push to shard 0 to carry.
  std::vector<wire::ChunkUse> uses;
};

// The examples of the options' split over all workers: the IDX set's, or the records of its
// TFRecord files (counted from their headers).
Result<int64_t> ExamplesPerEpoch(const InputOptions& options);

class InputPipeline {
 public:
  // Loads or opens the data and starts the background threads. `seed` fixes the shuffle order
  // and the augmentation (the same for any number of threads).
  static Result<std::unique_ptr<InputPipeline>> Create(const InputOptions& options,
                                                       int64_t batch_size, int worker_index,
                                                       int worker_count, uint64_t seed);
  // Stops and joins the background threads, also in the middle of an epoch.
  ~InputPipeline();
  InputPipeline(const InputPipeline&) = delete;
  InputPipeline& operator=(const InputPipeline&) = delete;

  // The next batch. OutOfRange after the last of options.num_epochs epochs; an error met in
  // the background (e.g. DataLoss naming a corrupt file and offset) is returned here, then
  // on every later call.
  Result<Batch> Next();

  // Examples in this worker's share per epoch (TFRecord files: counted from record headers).
  int64_t examples_per_epoch() const { return source_->size(); }
  // [C, H, W]
  Shape image_shape() const;

 private:
  // A batch in the making: the raw examples, or the Status that ends the input.
  struct Work {
    int64_t seq = 0;
    Status status;
    int64_t epoch = 0;
    std::vector<RawExample> examples;
    std::vector<wire::ChunkUse> uses;
  };
  struct Ready {
    Status status;
    Batch batch;
  };

  InputPipeline(const InputOptions& options, int64_t batch_size, uint64_t seed,
                std::unique_ptr<ExampleSource> source, ImagePreprocessor preprocessor);
  void ReadLoop();
  void PreprocessLoop();
  // Hands `work` on (to a preprocessing thread, or preprocesses it here); false once stopped.
  bool Emit(Work work);
  Ready Preprocess(Work work) const;

  const InputOptions options_;
  const int64_t batch_size_;
  const uint64_t seed_;
  std::unique_ptr<ExampleSource> source_;
  LeasedExampleSource* const leased_;  // source_, with elastic data; else null
  const ImagePreprocessor preprocessor_;
  std::mt19937_64 shuffle_rng_;
  ShuffleBuffer shuffle_;

  OrderedQueue<Work> work_;    // reader -> preprocessing threads (when threads > 1)
  OrderedQueue<Ready> ready_;  // -> Next(), in the reader's order
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  Status final_status_;  // sticky end or error, seen only by Next()'s caller
};

}  // namespace pstrain
