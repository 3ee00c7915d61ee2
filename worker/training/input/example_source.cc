#include "worker/training/input/example_source.h"

#include <algorithm>
#include <numeric>

#include "common/record_io.h"

namespace pstrain {
namespace {

class ImageSetSource : public ExampleSource {
 public:
  ImageSetSource(std::shared_ptr<const ImageSet> set, int worker_index, int worker_count)
      : set_(std::move(set)), first_(worker_index), stride_(worker_count) {
    for (int64_t i = first_; i < set_->count; i += stride_) order_.push_back(i);
  }

  // With `rng`, a fresh permutation of this worker's share every epoch (as TF's and PyTorch's
  // reference jobs draw theirs: rng.permutation(shard)); without, the share in file order.
  // A shuffle buffer alone, over the same file order every epoch, left the README's async job a
  // third of a point lower (docs/performance.md).
  Status StartEpoch(std::mt19937_64* rng) override {
    std::sort(order_.begin(), order_.end());
    if (rng) std::shuffle(order_.begin(), order_.end(), *rng);
    next_ = 0;
    return Status::OK();
  }

  Status Next(RawExample* out) override {
    if (next_ >= order_.size()) return OutOfRange("end of epoch");
    const int64_t i = order_[next_++];
    const uint8_t* p = set_->image(i);
    out->pixels.assign(reinterpret_cast<const char*>(p), set_->example_bytes());
    out->label = set_->labels[i];
    return Status::OK();
  }

  ImageShape shape() const override { return {set_->height, set_->width, set_->channels}; }

  int64_t size() const override {
    return first_ < set_->count ? (set_->count - first_ + stride_ - 1) / stride_ : 0;
  }

 private:
  std::shared_ptr<const ImageSet> set_;
  int64_t first_;
  int64_t stride_;
  std::vector<int64_t> order_;  // this worker's examples in this epoch's order
  size_t next_ = 0;
};

class TfRecordSource : public ExampleSource {
 public:
  TfRecordSource(FileShard shard, const ImageShape& shape, const ExampleFeatures& features,
                 int64_t size)
      : shard_(std::move(shard)),
        shape_(shape),
        features_(features),
        order_(shard_.files.size()),
        size_(size) {
    std::iota(order_.begin(), order_.end(), 0);
  }

  Status StartEpoch(std::mt19937_64* rng) override {
    std::iota(order_.begin(), order_.end(), 0);
    if (rng) std::shuffle(order_.begin(), order_.end(), *rng);
    position_ = 0;
    reader_.reset();
    return Status::OK();
  }

  Status Next(RawExample* out) override {
    while (true) {
      if (!reader_) {
        if (position_ >= order_.size()) return OutOfRange("end of epoch");
        const int i = order_[position_++];
        ASSIGN_OR_RETURN(
            ImageExampleReader reader,
            ImageExampleReader::Open(shard_.files[i], shape_, features_, shard_.compression));
        reader_.emplace(std::move(reader));
        file_number_ = shard_.file_numbers[i];
        record_number_ = 0;
      }
      const int64_t r = record_number_++;
      // Records of other workers are still read: finding the next record needs its length.
      Status s = reader_->Next(&record_);
      if (s.code() == StatusCode::kOutOfRange) {
        reader_.reset();
        continue;
      }
      RETURN_IF_ERROR(s);
      if (!shard_.by_record || (file_number_ + r) % shard_.worker_count == shard_.worker_index) {
        out->pixels.swap(record_.bytes);
        out->label = record_.label;
        out->encoded = record_.encoded;
        if (record_.encoded) out->origin = reader_->where();
        return Status::OK();
      }
    }
  }

  ImageShape shape() const override { return shape_; }
  int64_t size() const override { return size_; }

 private:
  FileShard shard_;
  ImageShape shape_;
  ExampleFeatures features_;
  std::vector<int> order_;
  int64_t size_;
  size_t position_ = 0;
  std::optional<ImageExampleReader> reader_;
  int64_t file_number_ = 0;
  int64_t record_number_ = 0;
  ImageRecord record_;
};

}  // namespace

std::unique_ptr<ExampleSource> MakeImageSetSource(std::shared_ptr<const ImageSet> set,
                                                  int worker_index, int worker_count) {
  return std::make_unique<ImageSetSource>(std::move(set), worker_index, worker_count);
}

FileShard ShardFiles(const std::vector<std::string>& files, int worker_index, int worker_count,
                     Compression compression) {
  FileShard shard;
  shard.compression = compression;
  shard.worker_index = worker_index;
  shard.worker_count = worker_count;
  shard.by_record = static_cast<int>(files.size()) < worker_count;
  for (int f = 0; f < static_cast<int>(files.size()); ++f) {
    if (shard.by_record || f % worker_count == worker_index) {
      shard.files.push_back(files[f]);
      shard.file_numbers.push_back(f);
    }
  }
  return shard;
}

Result<int64_t> CountShardExamples(const FileShard& shard) {
  int64_t total = 0;
  for (size_t i = 0; i < shard.files.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t records, CountRecords(shard.files[i], shard.compression));
    if (!shard.by_record) {
      total += records;
      continue;
    }
    // Records r with (file + r) % count == index: r = first, first + count, ...
    const int64_t count = shard.worker_count;
    const int64_t first = ((shard.worker_index - shard.file_numbers[i]) % count + count) % count;
    total += records > first ? (records - first + count - 1) / count : 0;
  }
  return total;
}

std::unique_ptr<ExampleSource> MakeTfRecordSource(FileShard shard, const ImageShape& shape,
                                                  const ExampleFeatures& features, int64_t size) {
  return std::make_unique<TfRecordSource>(std::move(shard), shape, features, size);
}

}  // namespace pstrain
