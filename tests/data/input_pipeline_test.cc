#include "worker/training/input/input_pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <set>
#include <thread>

#include "common/data/image_shards.h"
#include "tests/data/test_images.h"

namespace pstrain {
namespace {

using testing_data::Contains;
using testing_data::MakeImageSet;
using testing_data::TestDir;

InputOptions InMemory(const ImageSet& set) {
  InputOptions o;
  o.images = std::make_shared<const ImageSet>(set);
  o.shuffle_capacity = 100;
  o.min_after_dequeue = 50;
  return o;
}

std::unique_ptr<InputPipeline> MustCreate(const InputOptions& o, int64_t batch, int index = 0,
                                          int count = 1, uint64_t seed = 1) {
  auto p = InputPipeline::Create(o, batch, index, count, seed);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? std::move(p).value() : nullptr;
}

// The labels of every batch until OutOfRange (labels are example ids in these tests).
std::vector<std::vector<int32_t>> LabelsPerEpoch(InputPipeline* p) {
  std::vector<std::vector<int32_t>> epochs;
  while (true) {
    auto b = p->Next();
    if (b.status().code() == StatusCode::kOutOfRange) break;
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    if (!b.ok()) break;
    if (b->epoch >= static_cast<int64_t>(epochs.size())) epochs.resize(b->epoch + 1);
    EXPECT_EQ(b->images.dim(0), static_cast<int64_t>(b->labels.size()));
    for (int32_t l : b->labels) epochs[b->epoch].push_back(l);
  }
  return epochs;
}

std::vector<int32_t> Iota(int32_t n) {
  std::vector<int32_t> v(n);
  for (int32_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

TEST(InputPipelineTest, ShuffleYieldsEveryExampleExactlyOncePerEpoch) {
  InputOptions o = InMemory(MakeImageSet(1000));
  o.num_epochs = 2;
  o.drop_remainder = false;
  auto p = MustCreate(o, 32);
  auto epochs = LabelsPerEpoch(p.get());
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_NE(epochs[0], Iota(1000)) << "not shuffled";
  EXPECT_NE(epochs[0], epochs[1]) << "each epoch should have its own order";
  for (auto& e : epochs) {
    std::sort(e.begin(), e.end());
    EXPECT_EQ(e, Iota(1000));
  }
}

TEST(InputPipelineTest, DropRemainderDropsOnlyTheLastPartialBatch) {
  InputOptions o = InMemory(MakeImageSet(100));
  o.num_epochs = 2;
  for (bool drop : {true, false}) {
    o.drop_remainder = drop;
    auto p = MustCreate(o, 32);
    std::vector<int64_t> sizes;
    while (true) {
      auto b = p->Next();
      if (!b.ok()) break;
      sizes.push_back(b->images.dim(0));
      EXPECT_EQ(b->images.shape(), (Shape{b->images.dim(0), 1, 4, 5}));
    }
    if (drop) {
      EXPECT_EQ(sizes, (std::vector<int64_t>{32, 32, 32, 32, 32, 32}));
    } else {
      EXPECT_EQ(sizes, (std::vector<int64_t>{32, 32, 32, 4, 32, 32, 32, 4}));
    }
  }
}

// Runs one epoch on each of `count` workers; checks the shares are disjoint and cover `n`.
void ExpectPartition(const InputOptions& base, int count, int32_t n) {
  InputOptions o = base;
  o.num_epochs = 1;
  o.drop_remainder = false;
  std::multiset<int32_t> all;
  for (int w = 0; w < count; ++w) {
    auto p = MustCreate(o, 8, w, count);
    auto epochs = LabelsPerEpoch(p.get());
    ASSERT_EQ(epochs.size(), 1u) << "worker " << w << " of " << count;
    // The epoch the step counts and evaluations are planned on is the one the worker reads.
    EXPECT_EQ(p->examples_per_epoch(), static_cast<int64_t>(epochs[0].size()))
        << "worker " << w << " of " << count;
    EXPECT_GE(epochs[0].size(), static_cast<size_t>(n / count / 2)) << "unbalanced";
    all.insert(epochs[0].begin(), epochs[0].end());
  }
  EXPECT_EQ(std::vector<int32_t>(all.begin(), all.end()), Iota(n)) << count << " workers";
}

TEST(InputPipelineTest, ImageSetShardsPartitionTheData) {
  for (int count : {1, 2, 3, 7}) ExpectPartition(InMemory(MakeImageSet(101)), count, 101);
}

TEST(InputPipelineTest, TfRecordShardsPartitionTheDataByFileOrByRecord) {
  const std::string dir = TestDir();
  ASSERT_TRUE(WriteImageShards(MakeImageSet(101, 28, 28), dir + "/d", 4).ok());
  InputOptions o;
  o.source = InputSource::kTfRecord;
  o.tfrecord_pattern = dir + "/d-*";
  o.shuffle_capacity = 30;
  o.min_after_dequeue = 10;
  // 2 and 4 workers get whole files; 3 too (worker 0 takes files 0 and 3); 6 split records.
  EXPECT_FALSE(ShardFiles({"a", "b", "c", "d"}, 0, 3).by_record);
  EXPECT_TRUE(ShardFiles({"a", "b", "c", "d"}, 0, 6).by_record);
  for (int count : {1, 2, 3, 4, 6}) ExpectPartition(o, count, 101);
  Result<int64_t> all = ExamplesPerEpoch(o);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(*all, 101);
}

// The same shards GZIP- and ZLIB-compressed (pstrain-idx2tfrecord --compression): the same
// examples, with the config's `compression` or detected (auto).
TEST(InputPipelineTest, CompressedTfRecordShardsGiveTheSameExamples) {
  for (Compression written : {Compression::kGzip, Compression::kZlib}) {
    const std::string dir = TestDir() + "/" + CompressionName(written);
    std::filesystem::create_directories(dir);
    ASSERT_TRUE(WriteImageShards(MakeImageSet(101, 28, 28), dir + "/d", 4, written).ok());
    for (Compression told : {written, Compression::kAuto}) {
      InputOptions o;
      o.source = InputSource::kTfRecord;
      o.tfrecord_pattern = dir + "/d-*";
      o.compression = told;
      o.shuffle_capacity = 30;
      o.min_after_dequeue = 10;
      for (int count : {1, 3}) ExpectPartition(o, count, 101);
      EXPECT_EQ(ExamplesPerEpoch(o).value(), 101);
    }
  }
  auto config =
      ConfigNode::Parse("{source: tfrecord, tfrecord_pattern: x, compression: snappy}", "input");
  Result<InputOptions> refused = InputOptions::FromConfig(*config);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("compression 'snappy': expected auto, none, gzip or "
                                            "zlib"),
            std::string::npos)
      << refused.status().message();
}

TEST(InputPipelineTest, SeedsChooseTheOrder) {
  InputOptions o = InMemory(MakeImageSet(500));
  o.num_epochs = 1;
  auto order = [&](uint64_t seed) { return LabelsPerEpoch(MustCreate(o, 50, 0, 1, seed).get()); };
  EXPECT_EQ(order(7), order(7));
  EXPECT_NE(order(7), order(8));
}

TEST(InputPipelineTest, ThreadCountDoesNotChangeTheBatches) {
  InputOptions o = InMemory(MakeImageSet(300, 8, 8));
  o.num_epochs = 2;
  o.random_flip = true;
  o.random_crop_padding = 2;
  o.prefetch_batches = 2;
  auto one = MustCreate(o, 16);
  o.threads = 3;
  auto three = MustCreate(o, 16);
  for (int i = 0; i < 36; ++i) {
    auto a = one->Next();
    auto b = three->Next();
    ASSERT_TRUE(a.ok() && b.ok()) << i;
    EXPECT_EQ(a->labels, b->labels);
    EXPECT_EQ(a->images.ToVector(), b->images.ToVector()) << "batch " << i;
  }
  EXPECT_EQ(one->Next().status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(three->Next().status().code(), StatusCode::kOutOfRange);
}

TEST(InputPipelineTest, EvaluationReadsTheTestSetInOrderWithAPartialLastBatch) {
  InputOptions train = InMemory(MakeImageSet(10));
  train.random_flip = true;
  InputOptions eval = train.ForEvaluation();
  EXPECT_EQ(eval.split, Split::kTest);
  eval.images = std::make_shared<const ImageSet>(MakeImageSet(70));  // stands in for t10k
  auto p = MustCreate(eval, 32);
  std::vector<int64_t> sizes;
  std::vector<int32_t> labels;
  Result<Batch> b = p->Next();
  for (; b.ok(); b = p->Next()) {
    sizes.push_back(b->images.dim(0));
    labels.insert(labels.end(), b->labels.begin(), b->labels.end());
  }
  EXPECT_EQ(b.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(p->Next().status().code(), StatusCode::kOutOfRange) << "the end is sticky";
  EXPECT_EQ(sizes, (std::vector<int64_t>{32, 32, 6}));
  EXPECT_EQ(labels, Iota(70));
}

TEST(InputPipelineTest, DestroyingMidEpochStopsTheThreads) {
  InputOptions o = InMemory(MakeImageSet(5000));
  o.prefetch_batches = 2;
  for (int threads : {1, 4}) {
    o.threads = threads;
    auto p = MustCreate(o, 16);
    ASSERT_TRUE(p->Next().ok());
    // Let the background fill the queue and block on it.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> destroyed = done->get_future();
    std::thread([p = std::move(p), done]() mutable {
      p.reset();
      done->set_value();
    }).detach();
    ASSERT_EQ(destroyed.wait_for(std::chrono::seconds(20)), std::future_status::ready)
        << "the destructor hangs with " << threads << " threads";
  }
}

TEST(InputPipelineTest, CorruptRecordInTheBackgroundReachesNext) {
  const std::string dir = TestDir();
  ImageSet set = MakeImageSet(40, 28, 28);
  auto paths = WriteImageShards(set, dir + "/d", 2);
  ASSERT_TRUE(paths.ok());
  const int64_t record_bytes = 12 + EncodeImageExample(set.image(0), ImageShape{}, 0).size() + 4;
  testing_data::FlipByte((*paths)[1], 5 * record_bytes + 50);
  InputOptions o;
  o.source = InputSource::kTfRecord;
  o.tfrecord_files = *paths;
  o.shuffle = false;
  auto p = MustCreate(o, 4);
  Status s;
  for (int i = 0; i < 20 && s.ok(); ++i) s = p->Next().status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_TRUE(
      Contains(s.message(), (*paths)[1] + " at byte offset " + std::to_string(5 * record_bytes)))
      << s.message();
  EXPECT_EQ(p->Next().status().message(), s.message()) << "the error is sticky";
}

TEST(InputPipelineTest, CreateRejectsBadArguments) {
  InputOptions o = InMemory(MakeImageSet(10));
  EXPECT_EQ(InputPipeline::Create(o, 0, 0, 1, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(InputPipeline::Create(o, 8, 2, 2, 1).status().code(), StatusCode::kInvalidArgument);
  auto p = InputPipeline::Create(o, 8, 10, 11, 1);  // 10 examples, 11 workers
  EXPECT_EQ(p.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(p.status().message(), "worker 10 of 11 has no examples"));
  o.source = InputSource::kTfRecord;
  EXPECT_TRUE(
      Contains(InputPipeline::Create(o, 8, 0, 1, 1).status().message(), "set tfrecord_pattern"));
}

// Batches of 128 per second from one background thread, the trainer taking them at once.
TEST(InputPipelineTest, OneThreadKeepsAheadOfTheTrainer) {
  std::shared_ptr<const ImageSet> images;
  if (testing_data::HaveFashionMnist()) {
    auto set = LoadFashionMnist(testing_data::kFashionMnistDir, Split::kTrain);
    ASSERT_TRUE(set.ok());
    images = std::make_shared<const ImageSet>(std::move(set).value());
  } else {
    images = std::make_shared<const ImageSet>(MakeImageSet(60000, 28, 28));
  }
  for (bool augment : {false, true}) {
    InputOptions o;
    o.images = images;
    o.mean = {0.286f};
    o.stddev = {0.353f};
    o.random_flip = augment;
    o.random_crop_padding = augment ? 2 : 0;
    auto p = MustCreate(o, 128);
    ASSERT_TRUE(p->Next().ok());  // past the shuffle buffer's first fill
    const int kBatches = 1000;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kBatches; ++i) ASSERT_TRUE(p->Next().ok());
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf(
        "[ metric ] input pipeline, 1 thread, IDX%s: %.0f batches of 128/s (%.0f images/s)\n",
        augment ? " + flip + crop" : "", kBatches / s, kBatches * 128 / s);
    // The trainer needs ~1000 images/s; 10x that leaves room on a loaded machine.
    EXPECT_GT(kBatches / s, 10.0);
  }
}

}  // namespace
}  // namespace pstrain
