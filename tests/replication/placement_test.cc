// PlaceReplicas: the epoch-1 shard map every process computes from --ps_hosts and --replicas
// (docs/replication.md section 1).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "common/replication/shard_map.h"
#include "tests/captured_log.h"

namespace pstrain {
namespace replication {
namespace {

std::string Host(const std::string& entry) { return entry.substr(0, entry.rfind(':')); }

TEST(PlaceReplicasTest, EachShardsReplicasAreOnDifferentHostsWhereThereAreEnough) {
  // Two tasks per host: the ring's next task shares the head's host and is passed over.
  const std::vector<std::string> hosts = {"h1:2222", "h1:2223", "h2:2222", "h2:2223"};
  auto map = PlaceReplicas(hosts, 1);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_EQ(map->epoch, 1u);
  EXPECT_EQ(map->chains, (std::vector<std::vector<int>>{{0, 2}, {1, 2}, {2, 0}, {3, 0}}));
  for (int s = 0; s < map->num_shards(); ++s) {
    EXPECT_EQ(map->head(s), s);
    EXPECT_TRUE(map->joining[s].empty());
    std::set<std::string> on;
    for (int t : map->chains[s]) on.insert(Host(hosts[t]));
    EXPECT_EQ(on.size(), map->chains[s].size()) << map->Describe();
  }

  // The multihost run: 2 servers on 2 hosts back each other up.
  auto two = PlaceReplicas({"10.0.0.1:2222", "10.0.0.2:2222"}, 1);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->chains, (std::vector<std::vector<int>>{{0, 1}, {1, 0}}));

  // localhost and 127.* are one machine, so task 1 is on shard 0's host.
  auto loopback = PlaceReplicas({"localhost:2222", "127.0.0.1:2223", "10.0.0.2:2222"}, 1);
  ASSERT_TRUE(loopback.ok());
  EXPECT_EQ(loopback->chains[0], (std::vector<int>{0, 2}));
  EXPECT_EQ(loopback->chains[1], (std::vector<int>{1, 2}));
}

TEST(PlaceReplicasTest, TooFewHostsSharesAHostAndSaysSo) {
  testing::CapturedLog log;
  auto map = PlaceReplicas({"10.0.0.1:2222", "10.0.0.2:2222", "10.0.0.2:2223"}, 2);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  // The other host first, then the rest in ring order.
  EXPECT_EQ(map->chains, (std::vector<std::vector<int>>{{0, 1, 2}, {1, 0, 2}, {2, 0, 1}}));
  for (int s = 0; s < 3; ++s) {
    EXPECT_NE(log.Find({"WARNING", "shard " + std::to_string(s) + " has 2 replicas on host " +
                                       "10.0.0.2 (2 hosts for 1+2 replicas)"}),
              "")
        << log.All();
  }

  // Everything on one machine fills in ring order, and every shard says so.
  testing::CapturedLog local;
  auto one = PlaceReplicas({"localhost:1", "localhost:2", "127.0.0.1:3"}, 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->chains, (std::vector<std::vector<int>>{{0, 1}, {1, 2}, {2, 0}}));
  EXPECT_NE(local.Find({"shard 2 has 2 replicas on host localhost (1 hosts for 1+1 replicas)"}), "")
      << local.All();
}

TEST(PlaceReplicasTest, ReplicasFromAllServersAreRefusedNamingTheFlag) {
  auto all = PlaceReplicas({"h1:2222", "h2:2222"}, 2);
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(all.status().message().find("--replicas=2"), std::string::npos)
      << all.status().ToString();
  EXPECT_NE(all.status().message().find("--ps_hosts"), std::string::npos)
      << all.status().ToString();
  EXPECT_FALSE(PlaceReplicas({"h1:2222", "h2:2222"}, 3).ok());

  auto negative = PlaceReplicas({"h1:2222", "h2:2222"}, -1);
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("--replicas"), std::string::npos);
  EXPECT_FALSE(PlaceReplicas({}, 0).ok());
}

TEST(PlaceReplicasTest, WithNoReplicasEveryShardIsItsOwnTaskAlone) {
  auto map = PlaceReplicas({"h1:2222", "h1:2223", "h2:2222"}, 0);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_EQ(map->epoch, 1u);
  EXPECT_EQ(map->chains, (std::vector<std::vector<int>>{{0}, {1}, {2}}));
  EXPECT_EQ(map->joining, (std::vector<std::vector<int>>(3)));
  EXPECT_EQ(map->Describe(), "map epoch 1: shard 0 [ps0], shard 1 [ps1], shard 2 [ps2]");
}

}  // namespace
}  // namespace replication
}  // namespace pstrain
