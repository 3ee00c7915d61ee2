// What the input pipeline reads and how it shuffles, prefetches and augments. Batch size,
// worker index/count and seed come from the trainer, not from here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/data/idx.h"
#include "common/data/image_example.h"
#include "common/status.h"
#include "worker/training/input/image_fit.h"
#include "worker/training/input/leased_source.h"

namespace pstrain {

enum class InputSource { kIdx, kTfRecord };

struct InputOptions {
  InputSource source = InputSource::kIdx;
  // IDX: Fashion-MNIST files in data_dir, the split chosen by `split`.
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  Split split = Split::kTrain;
  // An in-memory set to use instead of loading data_dir (e.g. one already loaded to compute
  // the normalisation).
  std::shared_ptr<const ImageSet> images;
  // TFRecord: `tfrecord_files` when given, else the files matching the glob pattern for the
  // split (`tfrecord_pattern` for train, `test_tfrecord_pattern` for test).
  std::string tfrecord_pattern;
  std::string test_tfrecord_pattern;
  std::vector<std::string> tfrecord_files;
  // The TFRecord files' compression (TF's compression_type): auto tells from each file.
  Compression compression = Compression::kAuto;
  // The model's input (ReadInputOptions takes it from `model.input`). Raw records without
  // height/width/depth features are taken to be this shape; ones that have them must match.
  // Encoded images are decoded to its depth and fitted to it by `resize`.
  ImageShape image_shape;
  // Which Example features hold the image and label; label_offset is subtracted from labels.
  ExampleFeatures features;
  ResizeMethod resize = ResizeMethod::kNone;

  // TF's shuffle_batch: a buffer of `shuffle_capacity` from which a random example is taken
  // while more than `min_after_dequeue` remain. The buffer drains at the end of each epoch so
  // that every example appears exactly once per epoch.
  // In-memory sets (IDX) are also read in a fresh permutation of the worker's examples every
  // epoch, as TF's and PyTorch's reference jobs read theirs (the buffer alone, over the same
  // file order every epoch, cost the README's async job a third of a point).
  bool shuffle = true;
  int64_t shuffle_capacity = 10000;
  int64_t min_after_dequeue = 5000;
  // Keep (TF: allow_smaller_final_batch) or drop each epoch's last partial batch.
  bool drop_remainder = true;
  // 0 repeats forever; otherwise Next() returns OutOfRange after this many epochs.
  int64_t num_epochs = 0;

  int prefetch_batches = 4;
  // Background threads decoding and preprocessing batches.
  int threads = 1;

  // x/255, then (x - mean) / stddev per channel (one value applies to all channels; none
  // leaves x/255). ComputeNormalization() gives the training set's values.
  std::vector<float> mean;
  std::vector<float> stddev;
  // Training-only augmentation (`augment: {flip, pad_crop}`), drawn per batch from the seed
  // and the worker index, so the same seed gives the same batches.
  bool random_flip = false;
  // Pads this many zero pixels on each side, then crops back to height x width at a random
  // offset; 0 turns cropping off.
  int random_crop_padding = 0;

  // Elastic data (docs/replication.md section 6): when set, chunks leased from shard 0 through
  // this are read instead of this worker's modulo share, in chunk orders drawn from
  // `lease_seed` (the ledger's), with no shuffle buffer; epochs end when the ledger says so
  // (num_epochs is the servers'), every last partial batch is kept, and each batch carries its
  // examples' chunk uses. IDX sets only so far (TFRecord chunks need random access to records).
  LeaseChunk lease;
  uint64_t lease_seed = 0;

  // Reads the `input:` section of a config (source, data_dir, tfrecord_pattern,
  // test_tfrecord_pattern, compression, image_feature, raw_image_feature, label_feature,
  // label_offset, resize, shuffle_capacity, min_after_dequeue, prefetch_batches, threads, augment:
  // {flip, pad_crop}, mean, std; random_flip and random_crop_padding are the older spelling of
  // augment's fields); absent fields keep their defaults.
  static Result<InputOptions> FromConfig(const ConfigNode& node);

  // The same data source for evaluation: the test split (from data_dir or
  // test_tfrecord_pattern; `images` and `tfrecord_files` are cleared) in order, one epoch,
  // the last partial batch kept, no augmentation.
  InputOptions ForEvaluation() const;

  Status Validate() const;
};

}  // namespace pstrain
