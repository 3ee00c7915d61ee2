// Where the pipeline's examples come from: an in-memory image set or TFRecord shard files
// (streamed), each restricted to one worker's disjoint share of the data.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/data/idx.h"
#include "common/data/image_example.h"
#include "common/status.h"

namespace pstrain {

// One undecoded image: raw pixels, shape().bytes() bytes, height x width x depth; or, when
// `encoded`, JPEG/PNG bytes that the prefetch threads decode (errors then name `origin`).
struct RawExample {
  std::string pixels;
  int32_t label = 0;
  bool encoded = false;
  std::string origin;  // "<file> at record offset <n> (record <i>)"; set when encoded
};

class ExampleSource {
 public:
  virtual ~ExampleSource() = default;
  // Rewinds to the start of an epoch. With `rng`, this epoch's order is drawn from it: a
  // TFRecord source's file order (TF's string_input_producer with shuffle), an in-memory set's
  // full permutation of the worker's examples; without, everything is read in order.
  virtual Status StartEpoch(std::mt19937_64* rng) = 0;
  // The next example of this epoch; OutOfRange at its end.
  virtual Status Next(RawExample* out) = 0;
  virtual ImageShape shape() const = 0;
  // Examples per epoch in this worker's share, or -1 when unknown until read.
  virtual int64_t size() const = 0;
};

// Example i belongs to worker i % worker_count; StartEpoch(rng) draws a fresh permutation of
// them each epoch (the shuffle buffer then has nothing left to mix).
std::unique_ptr<ExampleSource> MakeImageSetSource(std::shared_ptr<const ImageSet> set,
                                                  int worker_index, int worker_count);

// Which parts of the files a worker reads. With at least as many files as workers, whole
// files (file f to worker f % count); otherwise every worker reads every file and keeps
// record r of file f when (f + r) % count == index (so small files still spread evenly).
struct FileShard {
  std::vector<std::string> files;
  std::vector<int> file_numbers;  // index of each file in the full sorted list
  bool by_record = false;
  int worker_index = 0;
  int worker_count = 1;
  Compression compression = Compression::kAuto;  // the files' (common/record_source.h)
};
FileShard ShardFiles(const std::vector<std::string>& files, int worker_index, int worker_count,
                     Compression compression = Compression::kAuto);

// `shape`: what raw records hold (encoded records are decoded and fitted later).
// The examples `shard` holds (every record of its files, or its share of them by record), from
// the files' record headers.
Result<int64_t> CountShardExamples(const FileShard& shard);

// `size`: CountShardExamples(shard).
std::unique_ptr<ExampleSource> MakeTfRecordSource(FileShard shard, const ImageShape& shape,
                                                  const ExampleFeatures& features, int64_t size);

}  // namespace pstrain
