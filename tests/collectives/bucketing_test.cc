#include "worker/distributed/collectives/bucketing.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/collectives/rank_threads.h"

namespace pstrain {
namespace {

TEST(AssignBucketsTest, BucketsRespectTheByteCapAndKeepBackwardOrder) {
  // 4-byte floats; a 40-byte cap holds at most 10 elements.
  const std::vector<int64_t> elements = {3, 4, 2, 6, 1, 1, 9, 0, 5};
  auto buckets = AssignBuckets(elements, {40});
  ASSERT_TRUE(buckets.ok()) << buckets.status().ToString();
  std::vector<int> order;
  for (const Bucket& b : *buckets) {
    int64_t sum = 0;
    for (int i : b.tensor_indices) {
      order.push_back(i);
      sum += elements[i];
    }
    EXPECT_EQ(sum, b.num_elements);
    EXPECT_LE(b.num_elements * 4, 40);
  }
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  // Greedy: {3,4,2} {6,1,1} {9,0} {5}.
  ASSERT_EQ(buckets->size(), 4u);
  EXPECT_EQ((*buckets)[0].tensor_indices, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ((*buckets)[2].tensor_indices, (std::vector<int>{6, 7}));
}

TEST(AssignBucketsTest, TensorLargerThanTheCapGetsABucketOfItsOwn) {
  auto buckets = AssignBuckets({1, 100, 1}, {16});
  ASSERT_TRUE(buckets.ok());
  ASSERT_EQ(buckets->size(), 3u);
  EXPECT_EQ((*buckets)[1].tensor_indices, std::vector<int>{1});
  EXPECT_EQ((*buckets)[1].num_elements, 100);
}

TEST(AssignBucketsTest, NonPositiveCapOrNegativeSizeIsInvalidArgument) {
  EXPECT_EQ(AssignBuckets({1}, {0}).status().code(), StatusCode::kInvalidArgument);
  auto bad = AssignBuckets({1, -2}, {64});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tensor 1"), std::string::npos);
}

TEST(FusionBufferTest, CopyInThenOutRestoresEveryTensor) {
  Tensor a = Tensor::FromVector({2}, {1, 2});
  Tensor b = Tensor::FromVector({3}, {3, 4, 5});
  std::vector<Tensor*> tensors = {&a, &b};
  Bucket bucket{{1, 0}, 5};
  std::vector<float> buffer(5);
  CopyIntoFusionBuffer(bucket, tensors, buffer.data());
  EXPECT_EQ(buffer, (std::vector<float>{3, 4, 5, 1, 2}));
  for (float& x : buffer) x *= 10;
  CopyOutOfFusionBuffer(bucket, buffer.data(), tensors);
  EXPECT_EQ(a.ToVector(), (std::vector<float>{10, 20}));
  EXPECT_EQ(b.ToVector(), (std::vector<float>{30, 40, 50}));
}

std::vector<Tensor> RankGradients(int rank, const std::vector<int64_t>& elements) {
  std::vector<Tensor> grads;
  for (size_t t = 0; t < elements.size(); ++t) {
    Tensor g(Shape{elements[t]});
    for (int64_t i = 0; i < g.size(); ++i) g[i] = 0.1f * (rank + 1) * (i + 1) + 0.37f * t;
    grads.push_back(std::move(g));
  }
  return grads;
}

TEST(BucketedAllReduceTest, EqualsPerTensorAllReduceBitwise) {
  const std::vector<int64_t> elements = {5, 17, 1, 0, 64, 3, 300, 2};
  auto buckets = AssignBuckets(elements, {128});
  ASSERT_TRUE(buckets.ok());
  ASSERT_GT(buckets->size(), 2u);
  const int size = 3;
  std::vector<std::vector<Tensor>> bucketed(size), per_tensor(size);
  std::vector<Status> statuses = RunRanks(size, [&](Collectives& c) {
    bucketed[c.rank()] = RankGradients(c.rank(), elements);
    per_tensor[c.rank()] = RankGradients(c.rank(), elements);
    std::vector<Tensor*> tensors;
    for (Tensor& t : bucketed[c.rank()]) tensors.push_back(&t);
    RETURN_IF_ERROR(AllReduceAverageBucketed(c, tensors, *buckets));
    for (Tensor& t : per_tensor[c.rank()]) RETURN_IF_ERROR(c.AllReduceAverage(t.data(), t.size()));
    return Status::OK();
  });
  for (const Status& s : statuses) ASSERT_TRUE(s.ok()) << s.ToString();
  for (int r = 0; r < size; ++r) {
    for (size_t t = 0; t < elements.size(); ++t) {
      EXPECT_EQ(bucketed[r][t].ToVector(), per_tensor[r][t].ToVector())
          << "rank " << r << " tensor " << t;
      EXPECT_EQ(bucketed[r][t].ToVector(), bucketed[0][t].ToVector());
    }
  }
}

// Stands in for device collectives (NCCL) on the CPU: says its data is not host memory, so
// the bucketed calls must group per-tensor calls on the tensors themselves instead of copying
// into a host fusion buffer; it records what they did.
class GroupingCollectives : public Collectives {
 public:
  explicit GroupingCollectives(Collectives& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  Status AllReduceAverage(float* data, int64_t n) override {
    Note(data);
    return inner_.AllReduceAverage(data, n);
  }
  Status Broadcast(float* data, int64_t n, int root) override {
    Note(data);
    return inner_.Broadcast(data, n, root);
  }
  Status ReduceScatterAverage(const float* in, float* out, int64_t n) override {
    return inner_.ReduceScatterAverage(in, out, n);
  }
  Status AllGather(const float* in, float* out, int64_t n) override {
    return inner_.AllGather(in, out, n);
  }
  bool host_memory() const override { return false; }
  Status GroupStart() override {
    if (in_group_) return FailedPrecondition("nested group");
    in_group_ = true;
    ++groups;
    return Status::OK();
  }
  Status GroupEnd() override {
    in_group_ = false;
    return Status::OK();
  }

  int groups = 0;
  int calls_outside_groups = 0;
  std::vector<const float*> pointers;  // every data pointer a call got

 private:
  void Note(const float* data) {
    if (!in_group_) ++calls_outside_groups;
    pointers.push_back(data);
  }
  Collectives& inner_;
  bool in_group_ = false;
};

TEST(BucketedAllReduceTest, DeviceCollectivesGroupEachBucketsTensorsWithoutFusionCopies) {
  const std::vector<int64_t> elements = {5, 17, 1, 64, 3, 300, 2};
  auto buckets = AssignBuckets(elements, {128});
  ASSERT_TRUE(buckets.ok());
  const int size = 2;
  std::vector<std::vector<Tensor>> grouped(size), per_tensor(size);
  std::vector<int> groups(size);
  std::vector<Status> statuses = RunRanks(size, [&](Collectives& inner) {
    GroupingCollectives c(inner);
    grouped[c.rank()] = RankGradients(c.rank(), elements);
    per_tensor[c.rank()] = RankGradients(c.rank(), elements);
    std::vector<Tensor*> tensors;
    for (Tensor& t : grouped[c.rank()]) tensors.push_back(&t);
    RETURN_IF_ERROR(AllReduceAverageBucketed(c, tensors, *buckets));
    EXPECT_EQ(c.calls_outside_groups, 0);
    for (const float* p : c.pointers) {
      bool is_a_tensor = false;
      for (Tensor* t : tensors) is_a_tensor |= p == t->data();
      EXPECT_TRUE(is_a_tensor) << "a call got a fusion buffer, not a tensor";
    }
    groups[c.rank()] = c.groups;
    for (Tensor& t : per_tensor[c.rank()])
      RETURN_IF_ERROR(inner.AllReduceAverage(t.data(), t.size()));
    return Status::OK();
  });
  for (const Status& s : statuses) ASSERT_TRUE(s.ok()) << s.ToString();
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(groups[r], static_cast<int>(buckets->size())) << "one group per bucket";
    for (size_t t = 0; t < elements.size(); ++t) {
      EXPECT_EQ(grouped[r][t].ToVector(), per_tensor[r][t].ToVector())
          << "rank " << r << " tensor " << t;
    }
  }
}

TEST(BucketedBroadcastTest, EveryRankEndsWithTheRootsTensorsOnBothPaths) {
  const std::vector<int64_t> elements = {4, 40, 1, 0, 7, 90};
  auto buckets = AssignBuckets(elements, {64});
  ASSERT_TRUE(buckets.ok());
  ASSERT_GT(buckets->size(), 2u);
  for (RankTransport transport : {RankTransport::kThreads, RankTransport::kHub}) {
    for (bool device_like : {false, true}) {
      const int size = 3, root = 1;
      std::vector<std::vector<Tensor>> got(size);
      std::vector<Status> statuses = RunRanks(
          size,
          [&](Collectives& inner) {
            GroupingCollectives grouping(inner);
            Collectives& c = device_like ? static_cast<Collectives&>(grouping) : inner;
            got[c.rank()] = RankGradients(c.rank(), elements);
            std::vector<Tensor*> tensors;
            for (Tensor& t : got[c.rank()]) tensors.push_back(&t);
            return BroadcastBucketed(c, tensors, *buckets, root);
          },
          transport);
      for (const Status& s : statuses) ASSERT_TRUE(s.ok()) << s.ToString();
      const std::vector<Tensor> expected = RankGradients(root, elements);
      for (int r = 0; r < size; ++r) {
        for (size_t t = 0; t < elements.size(); ++t) {
          EXPECT_EQ(got[r][t].ToVector(), expected[t].ToVector())
              << TransportName(transport) << (device_like ? " grouped" : " fused") << " rank " << r
              << " tensor " << t;
        }
      }
    }
  }
}

TEST(BucketedAllReduceTest, BucketNamingAMissingTensorIsInvalidArgument) {
  std::vector<Status> statuses = RunRanks(1, [&](Collectives& c) {
    Tensor a = Tensor::Filled({2}, 1.0f);
    std::vector<Tensor*> tensors = {&a};
    return AllReduceAverageBucketed(c, tensors, {Bucket{{0, 1}, 4}});
  });
  EXPECT_EQ(statuses[0].code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain
