// LeasedExampleSource (worker/training/input/leased_source.h) leasing from a real DataLedger
// through its callback, as a worker leases from shard 0: every example of its chunks read once,
// in each chunk's order from `skip` on, and the uses it reports per batch adding up.
#include "worker/training/input/leased_source.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>

#include "common/data/chunk_order.h"
#include "ps/data_ledger.h"
#include "worker/training/input/input_pipeline.h"

namespace pstrain {
namespace {

// A set whose example i has label i, so a read example names its index.
std::shared_ptr<const ImageSet> IndexedSet(int64_t n) {
  auto set = std::make_shared<ImageSet>();
  set->count = n;
  set->height = 1;
  set->width = 1;
  set->pixels.assign(n, 0);
  for (int64_t i = 0; i < n; ++i) set->labels.push_back(static_cast<int32_t>(i));
  return set;
}

ps::DataLedgerOptions LedgerOptions(int64_t examples, int64_t chunk, int64_t epochs) {
  ps::DataLedgerOptions o;
  o.examples = examples;
  o.chunk_size = chunk;
  o.epochs = epochs;
  o.seed = 42;
  return o;
}

// The pipeline leases on its reader thread while the test pushes uses on its own: the ledger,
// single-threaded as on a server, is used under this lock.
std::mutex ledger_mutex;

LeaseChunk LeaseFrom(ps::DataLedger* ledger, const std::string& worker) {
  return [ledger, worker](int64_t epoch) -> Result<data::ChunkLease> {
    std::lock_guard<std::mutex> lock(ledger_mutex);
    return ledger->Lease(worker, epoch);
  };
}

LeasedSourceOptions Fast() {
  LeasedSourceOptions o;
  o.seed = 42;
  o.retry = std::chrono::milliseconds(1);
  return o;
}

TEST(LeasedSourceTest, ReadsEveryExampleOfItsChunksOnceInTheChunksOrderAndItsUsesAddUp) {
  const int64_t examples = 95, chunk = 10, batch = 7;
  ps::DataLedger ledger(LedgerOptions(examples, chunk, 2));
  LeasedExampleSource source(LeaseFrom(&ledger, "worker 1"), ReadImageSet(IndexedSet(examples)),
                             {1, 1, 1}, Fast());
  std::map<int64_t, std::vector<int64_t>> read;  // by epoch, in read order
  int64_t spanning = 0;
  for (int pass = 0; pass < 4 && !source.finished(); ++pass) {
    ASSERT_TRUE(source.StartEpoch(nullptr).ok());
    int64_t in_batch = 0;
    auto push = [&] {
      std::vector<wire::ChunkUse> uses = source.TakeUses(in_batch);
      int64_t sum = 0;
      for (const auto& u : uses) sum += u.count;
      EXPECT_EQ(sum, in_batch);
      if (uses.size() > 1) ++spanning;
      ASSERT_TRUE(ledger.Use("worker 1", uses).ok());
      in_batch = 0;
    };
    while (true) {
      RawExample e;
      Status s = source.Next(&e);
      if (s.code() == StatusCode::kOutOfRange) break;
      ASSERT_TRUE(s.ok()) << s.ToString();
      read[source.epoch()].push_back(e.label);
      if (++in_batch == batch) push();
    }
    push();
  }
  EXPECT_TRUE(source.finished());
  EXPECT_GT(spanning, 0) << "some batch spans two chunks";
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    const std::vector<int64_t>& got = read[epoch];
    ASSERT_EQ(got.size(), static_cast<size_t>(examples)) << "epoch " << epoch;
    EXPECT_EQ(std::set<int64_t>(got.begin(), got.end()).size(), static_cast<size_t>(examples));
    // Chunk by chunk in the ledger's order, each in its own order.
    std::vector<int64_t> expected;
    for (int64_t c : data::ChunkOrder(42, epoch, 10)) {
      const int64_t size = data::ChunkSize(examples, chunk, c);
      for (int64_t k : data::ExampleOrder(42, epoch, c, size)) expected.push_back(c * chunk + k);
    }
    EXPECT_EQ(got, expected) << "epoch " << epoch;
    EXPECT_TRUE(ledger.complete(epoch));
  }
}

TEST(LeasedSourceTest, ThePipelineWithALeaseReadsEachExampleOncePerEpochAndItsBatchesCarryUses) {
  const int64_t examples = 100;
  ps::DataLedger ledger(LedgerOptions(examples, 16, 2));
  InputOptions o;
  o.images = IndexedSet(examples);
  o.lease = LeaseFrom(&ledger, "worker 1");
  o.lease_seed = 42;
  o.num_epochs = 7;        // the ledger's count wins
  o.prefetch_batches = 4;  // 32 examples ahead: the reader waits for pushes to lease a third
  ASSERT_TRUE(o.Validate().ok());
  auto pipeline = InputPipeline::Create(o, 8, 0, 1, 3);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status().ToString();
  std::map<int64_t, int> seen;
  int64_t batches = 0;
  while (true) {
    Result<Batch> batch = (*pipeline)->Next();
    if (batch.status().code() == StatusCode::kOutOfRange) break;
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    int64_t sum = 0;
    for (const auto& u : batch->uses) sum += u.count;
    ASSERT_EQ(sum, static_cast<int64_t>(batch->labels.size()));
    for (int32_t label : batch->labels) ++seen[label];
    std::lock_guard<std::mutex> lock(ledger_mutex);
    ASSERT_TRUE(ledger.Use("worker 1", batch->uses).ok());  // the step's push to shard 0
    ASSERT_LT(++batches, 1000);
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(examples));
  for (const auto& [index, times] : seen) EXPECT_EQ(times, 2) << "example " << index;
  std::lock_guard<std::mutex> lock(ledger_mutex);
  EXPECT_TRUE(ledger.complete(0));
  EXPECT_TRUE(ledger.complete(1));
}

TEST(LeasedSourceTest, AChunkTakenOverFromADepartedWorkerIsReadFromWhereItsPushesStopped) {
  ps::DataLedger ledger(LedgerOptions(30, 10, 1));
  Result<ps::ChunkLease> theirs = ledger.Lease("worker 1", 0);
  ASSERT_TRUE(theirs.ok());
  ASSERT_TRUE(ledger.Use("worker 1", {{0, theirs->chunk, 4}}).ok());
  ledger.Release("worker 1");
  LeasedExampleSource source(LeaseFrom(&ledger, "worker 2"), ReadImageSet(IndexedSet(30)),
                             {1, 1, 1}, Fast());
  ASSERT_TRUE(source.StartEpoch(nullptr).ok());
  const std::vector<int64_t> order = data::ExampleOrder(42, 0, theirs->chunk, 10);
  for (int i = 4; i < 10; ++i) {
    RawExample e;
    ASSERT_TRUE(source.Next(&e).ok());
    EXPECT_EQ(e.label, theirs->chunk * 10 + order[i]);
  }
  const std::vector<wire::ChunkUse> uses = source.TakeUses(6);
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0], (wire::ChunkUse{0, theirs->chunk, 6}));
  ASSERT_TRUE(ledger.Use("worker 2", uses).ok());
  EXPECT_EQ(ledger.used(0), 10);
}

TEST(LeasedSourceTest, AfterADropTheExamplesReadBeforeCountNothingAndItLeasesAfresh) {
  ps::DataLedger ledger(LedgerOptions(30, 10, 1));
  LeasedExampleSource source(LeaseFrom(&ledger, "worker 1"), ReadImageSet(IndexedSet(30)),
                             {1, 1, 1}, Fast());
  ASSERT_TRUE(source.StartEpoch(nullptr).ok());
  RawExample e;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(source.Next(&e).ok());
  const int64_t first_chunk = e.label / 10;
  ledger.Release("worker 1");  // presumed dead; the next push would be aborted
  source.Drop();
  ASSERT_TRUE(source.Next(&e).ok());  // the ledger aborts one lease, then lends again
  EXPECT_EQ(e.label / 10, first_chunk) << "the first free chunk is the one given back";
  const std::vector<wire::ChunkUse> uses = source.TakeUses(4);
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0].count, 1) << "the three examples read before the drop count nothing";
}

TEST(LeasedSourceTest, AnEmptyOrMalformedLeaseIsAnErrorNotAnEndOfEpoch) {
  LeasedExampleSource source(
      [](int64_t) -> Result<data::ChunkLease> {
        return data::ChunkLease{0, 0, 5, 0, 5};
      },
      ReadImageSet(IndexedSet(10)), {1, 1, 1}, Fast());
  ASSERT_TRUE(source.StartEpoch(nullptr).ok());
  RawExample e;
  Status s = source.Next(&e);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find("expected size > skip >= 0"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace pstrain
