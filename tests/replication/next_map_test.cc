// NextMap and PromoteJoiner: the chief's decisions as a chain master (docs/replication.md
// sections 4 and 5), driven here without sockets.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/replication/shard_map.h"

namespace pstrain {
namespace replication {
namespace {

using Chains = std::vector<std::vector<int>>;
constexpr TaskHealth kUp = TaskHealth::kUp;
constexpr TaskHealth kDown = TaskHealth::kDown;
constexpr TaskHealth kRestarted = TaskHealth::kRestarted;

ShardMap Place(int tasks, int replicas) {
  std::vector<std::string> hosts;
  for (int t = 0; t < tasks; ++t) hosts.push_back("10.0.0." + std::to_string(t + 1) + ":2222");
  return PlaceReplicas(hosts, replicas).value();
}

MapChange Next(const ShardMap& map, const std::vector<TaskHealth>& health,
               const ShardMap& placement) {
  auto change = NextMap(map, health, placement);
  EXPECT_TRUE(change.ok()) << change.status().ToString();
  return change.ok() ? *change : MapChange{map, {}, {}};
}

TEST(NextMapTest, TheHeadsDeathPromotesTheNextMemberNeverAJoiner) {
  const ShardMap placement = Place(4, 2);
  ASSERT_EQ(placement.chains[0], (std::vector<int>{0, 1, 2}));
  // ps1 dies and comes back: it joins shard 0 behind the tail ps2.
  ShardMap map = Next(placement, {kUp, kDown, kUp, kUp}, placement).map;
  map = Next(map, {kUp, kUp, kUp, kUp}, placement).map;
  ASSERT_EQ(map.chains[0], (std::vector<int>{0, 2}));
  ASSERT_EQ(map.joining[0], (std::vector<int>{1}));

  // The head ps0 dies: ps2, the next member, takes over; ps1 is still only copying.
  const MapChange change = Next(map, {kDown, kUp, kUp, kUp}, placement);
  EXPECT_EQ(change.map.head(0), 2) << change.map.Describe();
  EXPECT_EQ(change.map.chains[0], (std::vector<int>{2}));
  EXPECT_EQ(change.map.joining[0], (std::vector<int>{1}));
  EXPECT_TRUE(change.lost.empty());
  EXPECT_TRUE(change.fresh.empty());
  // Shard 3 ([3, 0, 1], ps1 joining) loses a backup and keeps its head.
  EXPECT_EQ(change.map.chains[3], (std::vector<int>{3}));
  EXPECT_EQ(change.map.joining[3], (std::vector<int>{1}));
}

TEST(NextMapTest, ARestartedTaskRejoinsAsTheTailOfItsChains) {
  const ShardMap placement = Place(3, 1);
  ASSERT_EQ(placement.chains, (Chains{{0, 1}, {1, 2}, {2, 0}}));
  // ps0 restarts before it is seen down: it leaves and rejoins in one change, and the head of
  // shard 0 stays with ps1 (never handed back).
  const MapChange restarted = Next(placement, {kRestarted, kUp, kUp}, placement);
  EXPECT_EQ(restarted.map.chains, (Chains{{1}, {1, 2}, {2}}));
  EXPECT_EQ(restarted.map.joining, (Chains{{0}, {}, {0}}));
  EXPECT_EQ(restarted.map.Describe(),
            "map epoch 2: shard 0 [ps1] joining [ps0], shard 1 [ps1 ps2], shard 2 [ps2] "
            "joining [ps0]");

  // Seen down, then up again: the same, over two epochs.
  ShardMap map = Next(placement, {kUp, kDown, kUp}, placement).map;
  EXPECT_EQ(map.chains, (Chains{{0}, {2}, {2, 0}}));
  map = Next(map, {kUp, kUp, kUp}, placement).map;
  EXPECT_EQ(map.epoch, 3u);
  EXPECT_EQ(map.chains, (Chains{{0}, {2}, {2, 0}}));
  EXPECT_EQ(map.joining, (Chains{{1}, {1}, {}}));
}

TEST(NextMapTest, AJoinerBecomesAMemberOnlyOnceCaughtUp) {
  const ShardMap placement = Place(3, 1);
  ShardMap map = Next(placement, {kRestarted, kUp, kUp}, placement).map;
  // However often the chief looks, an up joiner stays a joiner.
  for (int i = 0; i < 3; ++i) {
    const MapChange same = Next(map, {kUp, kUp, kUp}, placement);
    EXPECT_EQ(same.map, map) << same.map.Describe();
  }
  auto caught_up = PromoteJoiner(map, 0, 0);
  ASSERT_TRUE(caught_up.ok()) << caught_up.status().ToString();
  EXPECT_EQ(caught_up->chains[0], (std::vector<int>{1, 0}));
  EXPECT_TRUE(caught_up->joining[0].empty());
  EXPECT_EQ(caught_up->joining[2], (std::vector<int>{0}));  // shard 2's copy is its own
  EXPECT_EQ(caught_up->epoch, map.epoch + 1);

  // A member, or a task joining some other shard, is no joiner of this one.
  auto member = PromoteJoiner(map, 1, 2);
  ASSERT_FALSE(member.ok());
  EXPECT_NE(member.status().message().find("ps2 is not joining shard 1"), std::string::npos)
      << member.status().ToString();
  EXPECT_FALSE(PromoteJoiner(map, 1, 0).ok());
  EXPECT_FALSE(PromoteJoiner(map, 3, 0).ok());
}

TEST(NextMapTest, AShardWithNoMemberLeftIsReportedLost) {
  const ShardMap placement = Place(3, 1);
  // Both of shard 0's replicas die at once.
  const MapChange both = Next(placement, {kDown, kDown, kUp}, placement);
  EXPECT_EQ(both.lost, (std::vector<int>{0}));
  EXPECT_TRUE(both.fresh.empty());  // no task of its chain is left to start it afresh
  EXPECT_EQ(both.map.head(0), -1);
  EXPECT_EQ(both.map.chains, (Chains{{}, {2}, {2}}));

  // ps0 comes back: with nothing to copy from, it heads shard 0 holding nothing, for the chief to
  // initialise or restore; on shard 2 it joins as usual.
  const MapChange back = Next(both.map, {kUp, kDown, kUp}, placement);
  EXPECT_TRUE(back.lost.empty());
  EXPECT_EQ(back.fresh, (std::vector<int>{0}));
  EXPECT_EQ(back.map.chains, (Chains{{0}, {2}, {2}}));
  EXPECT_EQ(back.map.joining, (Chains{{}, {}, {0}}));

  // A joiner's partial copy makes it no replica: when the last member dies, the shard is lost,
  // and the joiner starts it afresh.
  ShardMap map = Next(placement, {kRestarted, kUp, kUp}, placement).map;
  ASSERT_EQ(map.joining[0], (std::vector<int>{0}));
  const MapChange joiner = Next(map, {kUp, kDown, kUp}, placement);
  EXPECT_EQ(joiner.lost, (std::vector<int>{0}));
  EXPECT_EQ(joiner.fresh, (std::vector<int>{0}));
  EXPECT_EQ(joiner.map.chains[0], (std::vector<int>{0}));
  EXPECT_TRUE(joiner.map.joining[0].empty());
}

TEST(NextMapTest, EveryChangeRaisesTheEpochByOne) {
  const ShardMap placement = Place(5, 2);
  ASSERT_EQ(placement.epoch, 1u);
  // Two deaths seen together are one change.
  ShardMap map = Next(placement, {kDown, kUp, kDown, kUp, kUp}, placement).map;
  EXPECT_EQ(map.epoch, 2u);
  // Nothing new: the same map and epoch.
  EXPECT_EQ(Next(map, {kDown, kUp, kDown, kUp, kUp}, placement).map, map);
  map = Next(map, {kUp, kUp, kDown, kUp, kUp}, placement).map;
  EXPECT_EQ(map.epoch, 3u);
  map = PromoteJoiner(map, 0, 0).value();
  EXPECT_EQ(map.epoch, 4u);
  map = Next(map, {kUp, kRestarted, kUp, kUp, kUp}, placement).map;
  EXPECT_EQ(map.epoch, 5u);

  // Health for another number of tasks is refused, not read past its end.
  EXPECT_FALSE(NextMap(map, {kUp, kUp}, placement).ok());
}

}  // namespace
}  // namespace replication
}  // namespace pstrain
