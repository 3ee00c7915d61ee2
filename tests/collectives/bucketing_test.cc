#include "worker/collectives/bucketing.h"

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
