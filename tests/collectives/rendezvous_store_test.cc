#include "worker/distributed/collectives/rendezvous_store.h"

#include <gtest/gtest.h>

#include <thread>

namespace pstrain {
namespace {

using std::chrono::milliseconds;

TEST(InMemoryStoreTest, GetWaitsForALaterSet) {
  auto table = std::make_shared<InMemoryStoreTable>();
  InMemoryStore rank0(table, 0);
  InMemoryStore rank1(table, 1);
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(50));
    ASSERT_TRUE(rank0.Set("nccl_unique_id", std::string("a\0b", 3)).ok());
  });
  Result<std::string> value = rank1.Get("nccl_unique_id", milliseconds(10000));
  setter.join();
  ASSERT_TRUE(value.ok()) << value.status().ToString();
  EXPECT_EQ(*value, std::string("a\0b", 3));
}

TEST(InMemoryStoreTest, GetTimesOutNamingTheKeyAndTheWaitingRank) {
  InMemoryStore store(std::make_shared<InMemoryStoreTable>(), 3);
  Result<std::string> value = store.Get("nccl_unique_id", milliseconds(20));
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(value.status().message().find("'nccl_unique_id'"), std::string::npos)
      << value.status().message();
  EXPECT_NE(value.status().message().find("rank 3"), std::string::npos) << value.status().message();
}

TEST(InMemoryStoreTest, WaitReturnsOnceEveryKeyIsSetAndNamesOnlyMissingOnes) {
  auto table = std::make_shared<InMemoryStoreTable>();
  InMemoryStore store(table, 0);
  ASSERT_TRUE(store.Set("a", "1").ok());
  Status missing = store.Wait({"a", "b"}, milliseconds(20));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("'b'"), std::string::npos) << missing.message();
  EXPECT_EQ(missing.message().find("'a'"), std::string::npos) << missing.message();
  ASSERT_TRUE(store.Set("b", "2").ok());
  EXPECT_TRUE(store.Wait({"a", "b"}, milliseconds(20)).ok());
}

TEST(InMemoryStoreTest, SettingAKeyTwiceIsAlreadyExists) {
  InMemoryStore store(std::make_shared<InMemoryStoreTable>(), 0);
  ASSERT_TRUE(store.Set("k", "1").ok());
  Status again = store.Set("k", "2");
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(store.Get("k", milliseconds(0)).value(), "1");
  EXPECT_TRUE(store.Set("k", "1").ok()) << "the same value again is a retry";
}

}  // namespace
}  // namespace pstrain
