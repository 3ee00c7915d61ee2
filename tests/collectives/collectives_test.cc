// Every collective, on both CPU transports: ranks as threads sharing memory (CpuCollectives)
// and ranks meeting at a HostHub over loopback TCP (HubCollectives), which must agree bitwise.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "tests/collectives/rank_threads.h"
#include "worker/distributed/collectives/cpu_collectives.h"

namespace pstrain {
namespace {

// Values whose sums round, so summation order shows in the low bits.
std::vector<float> RankValues(int rank, int64_t n) {
  std::mt19937 gen(1234 + rank);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// The average summed serially in rank order.
std::vector<float> SerialAverage(int size, int64_t n) {
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < size; ++r) inputs.push_back(RankValues(r, n));
  std::vector<float> average(n);
  for (int64_t i = 0; i < n; ++i) {
    float sum = inputs[0][i];
    for (int r = 1; r < size; ++r) sum += inputs[r][i];
    average[i] = sum / static_cast<float>(size);
  }
  return average;
}

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void ExpectAllOk(const std::vector<Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].ToString();
  }
}

// (transport, world size, n).
class CollectivesTest : public ::testing::TestWithParam<std::tuple<RankTransport, int, int64_t>> {
 protected:
  RankTransport transport() const { return std::get<0>(GetParam()); }
  int size() const { return std::get<1>(GetParam()); }
  int64_t n() const { return std::get<2>(GetParam()); }
  std::vector<Status> Run(const std::function<Status(Collectives&)>& body) const {
    return RunRanks(size(), body, transport());
  }
};

TEST_P(CollectivesTest, AllReduceAverageEqualsSerialAverageBitwiseOnEveryRank) {
  const std::vector<float> expected = SerialAverage(size(), n());
  std::vector<std::vector<float>> results(size());
  ExpectAllOk(Run([&](Collectives& c) {
    results[c.rank()] = RankValues(c.rank(), n());
    return c.AllReduceAverage(results[c.rank()].data(), n());
  }));
  for (int r = 0; r < size(); ++r) EXPECT_TRUE(BitwiseEqual(results[r], expected)) << "rank " << r;
}

TEST_P(CollectivesTest, BroadcastFromEachRootCopiesTheRootsData) {
  for (int root = 0; root < size(); ++root) {
    std::vector<std::vector<float>> results(size());
    ExpectAllOk(Run([&](Collectives& c) {
      results[c.rank()] = RankValues(c.rank(), n());
      return c.Broadcast(results[c.rank()].data(), n(), root);
    }));
    const std::vector<float> expected = RankValues(root, n());
    for (int r = 0; r < size(); ++r) {
      EXPECT_TRUE(BitwiseEqual(results[r], expected)) << "root " << root << " rank " << r;
    }
  }
}

TEST_P(CollectivesTest, ReduceScatterShardsThenAllGatherReproduceAllReduce) {
  const std::vector<float> expected = SerialAverage(size(), n());
  std::vector<std::vector<float>> shards(size());
  std::vector<std::vector<float>> gathered(size());
  ExpectAllOk(Run([&](Collectives& c) {
    const std::vector<float> in = RankValues(c.rank(), n());
    const ShardRange shard = ShardOf(n(), c.size(), c.rank());
    shards[c.rank()].resize(shard.size());
    RETURN_IF_ERROR(c.ReduceScatterAverage(in.data(), shards[c.rank()].data(), n()));
    gathered[c.rank()].assign(n(), -1.0f);
    return c.AllGather(shards[c.rank()].data(), gathered[c.rank()].data(), n());
  }));
  for (int r = 0; r < size(); ++r) {
    const ShardRange shard = ShardOf(n(), size(), r);
    std::vector<float> expected_shard(expected.begin() + shard.begin, expected.begin() + shard.end);
    EXPECT_TRUE(BitwiseEqual(shards[r], expected_shard)) << "shard of rank " << r;
    EXPECT_TRUE(BitwiseEqual(gathered[r], expected)) << "all-gather on rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(TransportsWorldSizesAndLengths, CollectivesTest,
                         ::testing::Combine(::testing::Values(RankTransport::kThreads,
                                                              RankTransport::kHub),
                                            ::testing::Values(1, 2, 3, 4),
                                            ::testing::Values<int64_t>(0, 1, 7, 1001, 1 << 20)),
                         [](const auto& info) {
                           return TransportName(std::get<0>(info.param)) + "_size" +
                                  std::to_string(std::get<1>(info.param)) + "_n" +
                                  std::to_string(std::get<2>(info.param));
                         });

TEST(ShardOfTest, ShardsAreNearEqualContiguousAndCoverN) {
  for (int size = 1; size <= 5; ++size) {
    for (int64_t n : {0, 1, 4, 7, 13}) {
      int64_t next = 0;
      for (int r = 0; r < size; ++r) {
        const ShardRange s = ShardOf(n, size, r);
        EXPECT_EQ(s.begin, next);
        EXPECT_TRUE(s.size() == n / size || s.size() == n / size + 1);
        next = s.end;
      }
      EXPECT_EQ(next, n);
    }
  }
}

class CollectivesErrorsTest : public ::testing::TestWithParam<RankTransport> {};

TEST_P(CollectivesErrorsTest, MismatchedNIsInvalidArgumentOnEveryRank) {
  std::vector<float> data(8, 1.0f);
  std::vector<Status> statuses = RunRanks(
      2,
      [&](Collectives& c) {
        std::vector<float> mine = data;
        return c.AllReduceAverage(mine.data(), c.rank() == 0 ? 4 : 5);
      },
      GetParam());
  for (const Status& s : statuses) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("n = 5"), std::string::npos) << s.message();
  }
}

TEST_P(CollectivesErrorsTest, BroadcastRootOutOfRangeIsInvalidArgumentAndGroupStaysUsable) {
  std::vector<Status> statuses = RunRanks(
      3,
      [&](Collectives& c) {
        std::vector<float> data(4, static_cast<float>(c.rank()));
        Status bad = c.Broadcast(data.data(), 4, 3);
        EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
        EXPECT_NE(bad.message().find("root must be in [0, 3), got 3"), std::string::npos)
            << bad.message();
        RETURN_IF_ERROR(c.Broadcast(data.data(), 4, 2));
        EXPECT_EQ(data, std::vector<float>(4, 2.0f));
        return Status::OK();
      },
      GetParam());
  ExpectAllOk(statuses);
}

TEST_P(CollectivesErrorsTest, NegativeNIsInvalidArgument) {
  std::vector<Status> statuses = RunRanks(
      2, [&](Collectives& c) { return c.AllReduceAverage(nullptr, -1); }, GetParam());
  for (const Status& s : statuses) EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST_P(CollectivesErrorsTest, NullDataWithElementsIsInvalidArgumentOnEveryRank) {
  std::vector<Status> statuses = RunRanks(
      2,
      [&](Collectives& c) {
        std::vector<float> data(3, 1.0f);
        return c.AllReduceAverage(c.rank() == 1 ? nullptr : data.data(), 3);
      },
      GetParam());
  for (const Status& s : statuses) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("rank 1: a data pointer is null"), std::string::npos) << s.message();
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, CollectivesErrorsTest,
                         ::testing::Values(RankTransport::kThreads, RankTransport::kHub),
                         [](const auto& info) { return TransportName(info.param); });

TEST(CpuCollectivesErrorsTest, RankOutsideTheGroupIsRejected) {
  auto context = std::make_shared<CpuCollectivesContext>(2);
  auto collectives = CpuCollectives::Create(context, 2);
  ASSERT_FALSE(collectives.ok());
  EXPECT_NE(collectives.status().message().find("[0, 2), got 2"), std::string::npos);
}

}  // namespace
}  // namespace pstrain
