#include "worker/training/input/input_pipeline.h"

#include <glog/logging.h>

#include "common/data/image_codec.h"
#include "common/data/image_shards.h"
#include "worker/training/input/image_fit.h"

namespace pstrain {
namespace {

// SplitMix64: independent seeds for the shuffle and for each batch's augmentation.
uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9e3779b97f4a7c15ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The TFRecord files of the options' split: `tfrecord_files`, else the split's pattern's matches.
Result<std::vector<std::string>> SplitFiles(const InputOptions& o) {
  if (!o.tfrecord_files.empty()) return o.tfrecord_files;
  const std::string& pattern =
      o.split == Split::kTrain ? o.tfrecord_pattern : o.test_tfrecord_pattern;
  if (pattern.empty()) {
    return InvalidArgument(
        std::string("no TFRecord files for the ") + SplitName(o.split) + " split: set " +
        (o.split == Split::kTrain ? "tfrecord_pattern" : "test_tfrecord_pattern"));
  }
  return MatchFiles(pattern);
}

Result<std::unique_ptr<ExampleSource>> OpenSource(const InputOptions& o, int worker_index,
                                                  int worker_count) {
  if (o.lease) {
    if (o.source != InputSource::kIdx) {
      return FailedPrecondition(
          "--elastic_data reads IDX sets only so far: TFRecord chunks need random access to "
          "records");
    }
    std::shared_ptr<const ImageSet> images = o.images;
    if (!images) {
      ASSIGN_OR_RETURN(ImageSet set, LoadFashionMnist(o.data_dir, o.split));
      images = std::make_shared<const ImageSet>(std::move(set));
    }
    LeasedSourceOptions leased;
    leased.seed = o.lease_seed;
    return std::unique_ptr<ExampleSource>(new LeasedExampleSource(
        o.lease, ReadImageSet(images), {images->height, images->width, images->channels}, leased));
  }
  if (o.source == InputSource::kIdx) {
    std::shared_ptr<const ImageSet> images = o.images;
    if (!images) {
      ASSIGN_OR_RETURN(ImageSet set, LoadFashionMnist(o.data_dir, o.split));
      images = std::make_shared<const ImageSet>(std::move(set));
    }
    auto source = MakeImageSetSource(images, worker_index, worker_count);
    if (source->size() == 0) {
      return FailedPrecondition("worker " + std::to_string(worker_index) + " of " +
                                std::to_string(worker_count) + " has no examples (the " +
                                SplitName(o.split) + " set has " + std::to_string(images->count) +
                                ")");
    }
    return source;
  }
  ASSIGN_OR_RETURN(std::vector<std::string> files, SplitFiles(o));
  FileShard shard = ShardFiles(files, worker_index, worker_count, o.compression);
  ASSIGN_OR_RETURN(int64_t examples, CountShardExamples(shard));
  if (examples == 0) {
    return FailedPrecondition("worker " + std::to_string(worker_index) + " of " +
                              std::to_string(worker_count) + " has no examples in the " +
                              SplitName(o.split) + " split's " + std::to_string(files.size()) +
                              " TFRecord file(s)");
  }
  return MakeTfRecordSource(std::move(shard), o.image_shape, o.features, examples);
}

}  // namespace

Result<int64_t> ExamplesPerEpoch(const InputOptions& o) {
  if (o.source == InputSource::kIdx) {
    if (o.images) return o.images->count;
    ASSIGN_OR_RETURN(ImageSet set, LoadFashionMnist(o.data_dir, o.split));
    return set.count;
  }
  ASSIGN_OR_RETURN(std::vector<std::string> files, SplitFiles(o));
  return CountShardExamples(ShardFiles(files, 0, 1, o.compression));
}

Result<std::unique_ptr<InputPipeline>> InputPipeline::Create(const InputOptions& options,
                                                             int64_t batch_size, int worker_index,
                                                             int worker_count, uint64_t seed) {
  RETURN_IF_ERROR(options.Validate());
  if (batch_size < 1) {
    return InvalidArgument("batch size is " + std::to_string(batch_size) + ", expected >= 1");
  }
  if (worker_count < 1 || worker_index < 0 || worker_index >= worker_count) {
    return InvalidArgument("worker index " + std::to_string(worker_index) + " is outside 0.." +
                           std::to_string(worker_count - 1));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ExampleSource> source,
                   OpenSource(options, worker_index, worker_count));
  ASSIGN_OR_RETURN(ImagePreprocessor preprocessor,
                   ImagePreprocessor::Create(source->shape(), options.mean, options.stddev,
                                             options.random_flip, options.random_crop_padding));
  std::unique_ptr<InputPipeline> pipeline(new InputPipeline(
      options, batch_size, Mix(seed, worker_index), std::move(source), std::move(preprocessor)));
  pipeline->threads_.emplace_back(&InputPipeline::ReadLoop, pipeline.get());
  for (int i = 0; options.threads > 1 && i < options.threads; ++i) {
    pipeline->threads_.emplace_back(&InputPipeline::PreprocessLoop, pipeline.get());
  }
  return pipeline;
}

InputPipeline::InputPipeline(const InputOptions& options, int64_t batch_size, uint64_t seed,
                             std::unique_ptr<ExampleSource> source, ImagePreprocessor preprocessor)
    : options_(options),
      batch_size_(batch_size),
      seed_(seed),
      source_(std::move(source)),
      leased_(dynamic_cast<LeasedExampleSource*>(source_.get())),
      preprocessor_(std::move(preprocessor)),
      shuffle_rng_(Mix(seed, 0x5eed)),
      shuffle_(options.shuffle && !leased_ ? options.shuffle_capacity : 0,
               options.min_after_dequeue, &shuffle_rng_),
      work_(options.threads),
      ready_(options.prefetch_batches) {}

InputPipeline::~InputPipeline() {
  stop_ = true;
  if (leased_) leased_->Stop();  // a lease being waited for
  work_.Close();
  ready_.Close();
  for (std::thread& t : threads_) t.join();
}

Shape InputPipeline::image_shape() const {
  const ImageShape& s = preprocessor_.shape();
  return Shape{s.depth, s.height, s.width};
}

Result<Batch> InputPipeline::Next() {
  if (!final_status_.ok()) return final_status_;
  Ready ready;
  if (!ready_.Pop(&ready)) return Internal("input pipeline is shutting down");
  if (!ready.status.ok()) {
    final_status_ = ready.status;
    return final_status_;
  }
  return std::move(ready.batch);
}

void InputPipeline::ReadLoop() {
  int64_t seq = 0;
  auto fail = [&](Status s) {
    Work w;
    w.seq = seq;
    w.status = std::move(s);
    Emit(std::move(w));
  };
  for (int64_t epoch = 0;
       leased_ ? !leased_->finished() : options_.num_epochs == 0 || epoch < options_.num_epochs;
       ++epoch) {
    Status s = source_->StartEpoch(options_.shuffle ? &shuffle_rng_ : nullptr);
    if (!s.ok()) return fail(s);
    shuffle_.StartEpoch();
    int64_t examples = 0;
    Work work;
    work.examples.reserve(batch_size_);
    while (!stop_.load(std::memory_order_relaxed)) {
      RawExample e;
      s = shuffle_.Next(source_.get(), &e);
      if (s.code() == StatusCode::kOutOfRange) break;
      if (!s.ok()) return fail(s);
      ++examples;
      work.examples.push_back(std::move(e));
      if (static_cast<int64_t>(work.examples.size()) == batch_size_) {
        work.seq = seq++;
        work.epoch = epoch;
        if (leased_) work.uses = leased_->TakeUses(batch_size_);
        if (!Emit(std::move(work))) return;
        work = Work();
        work.examples.reserve(batch_size_);
      }
    }
    if (stop_) return;
    if (examples == 0 && !leased_) {
      return fail(FailedPrecondition("the input has no examples for this worker"));
    }
    // With elastic data a dropped example would never be pushed, and its chunk never used whole.
    if (!work.examples.empty() && (!options_.drop_remainder || leased_)) {
      work.seq = seq++;
      work.epoch = epoch;
      if (leased_) work.uses = leased_->TakeUses(static_cast<int64_t>(work.examples.size()));
      if (!Emit(std::move(work))) return;
    }
    VLOG(1) << "input epoch " << epoch << " read: " << examples << " examples";
  }
  if (leased_) return fail(OutOfRange("end of input: the data ledger's epochs are used"));
  fail(OutOfRange("end of input after " + std::to_string(options_.num_epochs) + " epochs"));
}

void InputPipeline::PreprocessLoop() {
  Work work;
  while (work_.Pop(&work)) {
    const int64_t seq = work.seq;
    if (!ready_.Push(seq, Preprocess(std::move(work)))) return;
  }
}

bool InputPipeline::Emit(Work work) {
  if (options_.threads > 1) {
    const int64_t seq = work.seq;
    return work_.Push(seq, std::move(work));
  }
  const int64_t seq = work.seq;
  return ready_.Push(seq, Preprocess(std::move(work)));
}

InputPipeline::Ready InputPipeline::Preprocess(Work work) const {
  Ready ready;
  ready.status = std::move(work.status);
  if (!ready.status.ok()) return ready;
  const ImageShape& shape = preprocessor_.shape();
  const int64_t n = static_cast<int64_t>(work.examples.size());
  ready.batch.images = Tensor::Uninitialized(Shape{n, shape.depth, shape.height, shape.width});
  ready.batch.labels.resize(n);
  ready.batch.epoch = work.epoch;
  ready.batch.uses = std::move(work.uses);
  // Seeded per batch, so augmentation does not depend on which thread made the batch.
  std::mt19937_64 rng(Mix(seed_, work.seq));
  float* out = ready.batch.images.data();
  std::string decoded;
  std::vector<uint8_t> fitted;
  for (int64_t i = 0; i < n; ++i) {
    const RawExample& e = work.examples[i];
    const uint8_t* pixels = reinterpret_cast<const uint8_t*>(e.pixels.data());
    if (e.encoded) {
      // JPEG/PNG decoding is the costly part of TFRecord input: here it runs on the
      // preprocessing threads, in parallel, not on the reader.
      ImageShape decoded_shape;
      ready.status =
          DecodeImage(e.pixels, static_cast<int>(shape.depth), e.origin, &decoded_shape, &decoded);
      if (!ready.status.ok()) return ready;
      pixels = reinterpret_cast<const uint8_t*>(decoded.data());
      if (decoded_shape != shape) {
        fitted.resize(shape.bytes());
        ready.status =
            FitImage(pixels, decoded_shape, shape, options_.resize, e.origin, fitted.data());
        if (!ready.status.ok()) return ready;
        pixels = fitted.data();
      }
    }
    preprocessor_.Process(pixels, out + i * shape.bytes(), &rng);
    ready.batch.labels[i] = e.label;
  }
  return ready;
}

}  // namespace pstrain
