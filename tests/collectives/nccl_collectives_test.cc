// NCCL refuses two ranks on one GPU, so this runs one rank: it proves the Store rendezvous,
// communicator setup and every call path, not multi-rank arithmetic (cpu_collectives_test does).
#include <gtest/gtest.h>

#include <vector>

#ifdef PSTRAIN_HAVE_NCCL
#include <cuda_runtime.h>

#include "worker/distributed/collectives/nccl_collectives.h"
#endif

namespace pstrain {
namespace {

#ifdef PSTRAIN_HAVE_NCCL
class DeviceBuffer {
 public:
  explicit DeviceBuffer(const std::vector<float>& host) : n_(host.size()) {
    CHECK_EQ(cudaMalloc(&data_, (n_ + 1) * sizeof(float)), cudaSuccess);
    CHECK_EQ(cudaMemcpy(data_, host.data(), n_ * sizeof(float), cudaMemcpyHostToDevice),
             cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(data_); }
  float* data() { return data_; }
  std::vector<float> ToHost() const {
    std::vector<float> host(n_);
    CHECK_EQ(cudaMemcpy(host.data(), data_, n_ * sizeof(float), cudaMemcpyDeviceToHost),
             cudaSuccess);
    return host;
  }

 private:
  size_t n_;
  float* data_ = nullptr;
};
#endif

TEST(NcclCollectivesTest, OneRankAllReduceBroadcastReduceScatterAllGatherKeepTheData) {
#ifndef PSTRAIN_HAVE_NCCL
  GTEST_SKIP() << "built without NCCL (needs CUDA and nccl.h/libnccl at configure time)";
#else
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    GTEST_SKIP() << "no CUDA GPU visible; the NCCL path needs one";
  }
  InMemoryStore store(std::make_shared<InMemoryStoreTable>(), 0);
  auto nccl = NcclCollectives::Create(store, NcclOptions{});
  ASSERT_TRUE(nccl.ok()) << nccl.status().ToString();
  Collectives& c = **nccl;
  EXPECT_EQ(c.size(), 1);
  EXPECT_TRUE(store.Get("nccl_unique_id", std::chrono::milliseconds(0)).ok());

  const std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f};
  DeviceBuffer data(values);
  ASSERT_TRUE(c.AllReduceAverage(data.data(), values.size()).ok());
  EXPECT_EQ(data.ToHost(), values);
  ASSERT_TRUE(c.Broadcast(data.data(), values.size(), 0).ok());
  EXPECT_EQ(data.ToHost(), values);
  DeviceBuffer shard(std::vector<float>(values.size(), 0.0f));
  ASSERT_TRUE(c.ReduceScatterAverage(data.data(), shard.data(), values.size()).ok());
  EXPECT_EQ(shard.ToHost(), values);
  DeviceBuffer gathered(std::vector<float>(values.size(), 0.0f));
  ASSERT_TRUE(c.AllGather(shard.data(), gathered.data(), values.size()).ok());
  EXPECT_EQ(gathered.ToHost(), values);
  EXPECT_EQ(c.Broadcast(data.data(), values.size(), 1).code(), StatusCode::kInvalidArgument);
#endif
}

}  // namespace
}  // namespace pstrain
