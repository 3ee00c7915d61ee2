// The rendezvous store across processes: ranks reach the leader's table over loopback TCP (here
// from threads; the transport is the same as between processes).
#include "worker/distributed/collectives/zmq_store.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "tests/distributed/ports.h"
#include "worker/distributed/collectives/host_hub.h"

namespace pstrain {
namespace {

using std::chrono::milliseconds;

std::string Endpoint(int port) { return "tcp://127.0.0.1:" + std::to_string(port); }

TEST(ZmqStoreTest, AnNcclIdSetByTheLeaderReachesEveryRankByteForByte) {
  const int port = testing::PickPort();
  auto server = HostHub::Start("tcp://*:" + std::to_string(port), {});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::string id(128, '\0');  // as ncclGetUniqueId writes it: arbitrary bytes, NULs included
  std::mt19937 rng(7);
  for (char& c : id) c = static_cast<char>(rng());
  std::vector<Result<std::string>> got(3, Unavailable("unset"));
  std::vector<std::thread> ranks;
  for (int r = 1; r <= 3; ++r) {
    ranks.emplace_back([&, r] {
      auto store = ZmqStore::Connect(Endpoint(port), r);
      got[r - 1] = store.ok() ? (*store)->Get("nccl_id", milliseconds(10000)) : store.status();
    });
  }
  std::this_thread::sleep_for(milliseconds(100));  // the others ask before the leader sets
  auto leader = ZmqStore::Connect(Endpoint(port), 0);
  ASSERT_TRUE(leader.ok());
  ASSERT_TRUE((*leader)->Set("nccl_id", id).ok());
  for (auto& t : ranks) t.join();
  for (auto& value : got) {
    ASSERT_TRUE(value.ok()) << value.status().ToString();
    EXPECT_EQ(*value, id);
  }
}

TEST(ZmqStoreTest, ARankThatStartsBeforeTheServerStillGetsTheValue) {
  const int port = testing::PickPort();
  auto early = ZmqStore::Connect(Endpoint(port), 1);
  ASSERT_TRUE(early.ok());
  std::thread starter([&] {
    std::this_thread::sleep_for(milliseconds(300));
    auto server = HostHub::Start("tcp://*:" + std::to_string(port), {});
    ASSERT_TRUE(server.ok());
    auto leader = ZmqStore::Connect(Endpoint(port), 0);
    ASSERT_TRUE((*leader)->Set("k", "v").ok());
    std::this_thread::sleep_for(milliseconds(1000));  // keep serving while rank 1 asks
  });
  Result<std::string> value = (*early)->Get("k", milliseconds(10000));
  starter.join();
  ASSERT_TRUE(value.ok()) << value.status().ToString();
  EXPECT_EQ(*value, "v");
}

TEST(ZmqStoreTest, KeysAreWrittenOnceAndAMissingKeyTimesOutNamingIt) {
  const int port = testing::PickPort();
  auto server = HostHub::Start("tcp://*:" + std::to_string(port), {});
  ASSERT_TRUE(server.ok());
  auto store = ZmqStore::Connect(Endpoint(port), 2);
  ASSERT_TRUE((*store)->Set("a", "1").ok());
  Status again = (*store)->Set("a", "2");
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists) << again.ToString();
  EXPECT_EQ((*store)->Get("a", milliseconds(1000)).value(), "1");
  Status missing = (*store)->Wait({"a", "b"}, milliseconds(300));
  EXPECT_EQ(missing.code(), StatusCode::kUnavailable);
  EXPECT_NE(missing.message().find("'b'"), std::string::npos) << missing.message();
  EXPECT_NE(missing.message().find("rank 2"), std::string::npos) << missing.message();
}

}  // namespace
}  // namespace pstrain
