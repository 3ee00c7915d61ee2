// The chief's chain-master decisions (worker/distributed/shard_master.h) as pure functions over
// (map, heartbeat health, shardMap get replies): no sockets.
#include "worker/distributed/shard_master.h"

#include <gtest/gtest.h>

#include "common/wire/shard_map_message.h"

namespace pstrain {
namespace worker {
namespace {

using replication::ShardMap;

HeartbeatMonitor::Health Up(uint64_t incarnation) {
  HeartbeatMonitor::Health h;
  h.up = true;
  h.incarnation = incarnation;
  return h;
}

HeartbeatMonitor::Health Down(uint64_t incarnation) {
  HeartbeatMonitor::Health h = Up(incarnation);
  h.up = false;
  return h;
}

// Three tasks on three hosts, one backup each: shard s on [s, s+1].
ShardMap Placement() {
  Result<ShardMap> m = replication::PlaceReplicas({"a:1", "b:1", "c:1"}, 1);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.value();
}

ShardMap Map(uint64_t epoch, std::vector<std::vector<int>> chains,
             std::vector<std::vector<int>> joining) {
  ShardMap m;
  m.epoch = epoch;
  m.chains = std::move(chains);
  m.joining = std::move(joining);
  return m;
}

TEST(ShardMasterTest, TheStartingMapHasEachPlacedHeadAloneWithItsBackupsJoining) {
  const ShardMap start = StartingMap(Placement());
  EXPECT_EQ(start, Map(1, {{0}, {1}, {2}}, {{1}, {2}, {0}})) << start.Describe();
}

TEST(ShardMasterTest, AHeadsDeathPromotesTheNextMemberAndRaisesTheEpoch) {
  const ShardMap map = Map(3, {{0, 1}, {1, 2}, {2, 0}}, {{}, {}, {}});
  std::vector<uint64_t> known = {10, 11, 12};
  Result<replication::MapChange> change =
      DecideOnHealth(map, Placement(), {Down(10), Up(11), Up(12)}, &known);
  ASSERT_TRUE(change.ok()) << change.status().ToString();
  EXPECT_EQ(change->map, Map(4, {{1}, {1, 2}, {2}}, {{}, {}, {}})) << change->map.Describe();
  EXPECT_TRUE(change->fresh.empty());
  EXPECT_TRUE(change->lost.empty());
}

TEST(ShardMasterTest, NothingSeenChangedKeepsTheEpoch) {
  const ShardMap map = Map(3, {{0, 1}, {1, 2}, {2, 0}}, {{}, {}, {}});
  std::vector<uint64_t> known = {10, 11, 12};
  Result<replication::MapChange> change =
      DecideOnHealth(map, Placement(), {Up(10), Up(11), Up(12)}, &known);
  ASSERT_TRUE(change.ok());
  EXPECT_EQ(change->map, map);
}

TEST(ShardMasterTest, ARestartedTaskLeavesItsChainsAndJoinsThemAsTail) {
  const ShardMap map = Map(3, {{0, 1}, {1, 2}, {2, 0}}, {{}, {}, {}});
  std::vector<uint64_t> known = {10, 11, 12};
  // Task 1 answers under a new incarnation without ever having been found down.
  Result<replication::MapChange> change =
      DecideOnHealth(map, Placement(), {Up(10), Up(21), Up(12)}, &known);
  ASSERT_TRUE(change.ok());
  EXPECT_EQ(change->map, Map(4, {{0}, {2}, {2, 0}}, {{1}, {1}, {}})) << change->map.Describe();
  EXPECT_EQ(known[1], 21u) << "the new incarnation is the one judged from now on";
  // Judged once: the next look at the same health changes nothing.
  Result<replication::MapChange> again =
      DecideOnHealth(change->map, Placement(), {Up(10), Up(21), Up(12)}, &known);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->map, change->map);
}

TEST(ShardMasterTest, ACaughtUpJoinerReportedByItsTailAndItselfIsPromoted) {
  const ShardMap map = Map(5, {{0}, {1, 2}, {2, 0}}, {{1}, {}, {}});
  wire::Message reply;
  reply.map_epoch = 5;
  reply.chains = {{0, {0}, {1}}, {1, {1, 2}, {}}, {2, {2, 0}, {}}};  // the map as the chief set it
  reply.caught_up = {{0, {1}, {}}};
  wire::Message own = reply;  // the joiner's: the head's stamp verified its copy
  std::vector<Promotion> promoted;
  EXPECT_EQ(PromoteCaughtUp(map, {{0, reply}}, &promoted), map) << "on the tail's word alone";
  EXPECT_EQ(PromoteCaughtUp(map, {{1, own}}, &promoted), map) << "on the joiner's word alone";
  EXPECT_EQ(PromoteCaughtUp(map, {{2, reply}, {1, own}}, &promoted), map) << "not its tail";
  ASSERT_TRUE(promoted.empty());
  const ShardMap next = PromoteCaughtUp(map, {{0, reply}, {1, own}}, &promoted);
  EXPECT_EQ(next, Map(6, {{0, 1}, {1, 2}, {2, 0}}, {{}, {}, {}})) << next.Describe();
  ASSERT_EQ(promoted.size(), 1u);
  EXPECT_EQ(promoted[0].shard, 0);
  EXPECT_EQ(promoted[0].task, 1);
}

TEST(ShardMasterTest, AJoinerStillCopyingOrAReplyOfAnotherEpochPromotesNobody) {
  const ShardMap map = Map(5, {{0}, {1, 2}, {2, 0}}, {{1}, {}, {}});
  wire::Message copying;
  copying.map_epoch = 5;
  copying.chains = {{0, {0}, {1}}};
  wire::Message older;
  older.map_epoch = 4;
  older.caught_up = {{0, {1}, {}}};
  wire::Message hostile;  // a shard out of range, a task no map has
  hostile.map_epoch = 5;
  hostile.caught_up = {{7, {0, 1}, {}}, {0, {0, 99, -1}, {}}};
  wire::Message verified = older;  // the joiner's own word, its tail's missing
  verified.map_epoch = 5;
  std::vector<Promotion> promoted;
  const ShardMap next = PromoteCaughtUp(
      map, {{0, copying}, {0, older}, {0, hostile}, {9, copying}, {1, verified}}, &promoted);
  EXPECT_EQ(next, map);
  EXPECT_TRUE(promoted.empty());
}

TEST(ShardMasterTest, AShardWithNoMemberLeftIsReportedFresh) {
  // Shard 0 is held by task 0 alone while task 1 still copies it: task 0 dies.
  const ShardMap map = Map(2, {{0}, {1, 2}, {2, 0}}, {{1}, {}, {}});
  std::vector<uint64_t> known = {10, 11, 12};
  Result<replication::MapChange> change =
      DecideOnHealth(map, Placement(), {Down(10), Up(11), Up(12)}, &known);
  ASSERT_TRUE(change.ok());
  EXPECT_EQ(change->lost, std::vector<int>{0});
  EXPECT_EQ(change->fresh, std::vector<int>{0});
  EXPECT_EQ(change->map.head(0), 1) << change->map.Describe();
  EXPECT_EQ(change->map.epoch, 3u);
}

TEST(ShardMasterTest, TheTasksToPollAreTheTailsAndJoinersOfShardsWithJoiners) {
  const ShardMap map = Map(5, {{0}, {1, 2}, {}}, {{1}, {}, {0}});
  EXPECT_EQ(TasksToPoll(map), (std::vector<int>{0, 1}));
  EXPECT_TRUE(TasksToPoll(Map(5, {{0}, {1, 2}, {2}}, {{}, {}, {}})).empty());
}

TEST(ShardMasterTest, ARestartedChiefTakesTheHighestEpochTheServersHold) {
  std::vector<int> empty;
  const ShardMap held = Map(7, {{1}, {1, 2}, {2, 0}}, {{}, {}, {}});
  const ShardMap start = ChooseStartMap(Placement(), {ShardMap{}, held, std::nullopt}, &empty);
  EXPECT_EQ(start, held);
  EXPECT_EQ(empty, std::vector<int>{0}) << "a task without a map under one that has it restarted";
  std::vector<int> none;
  EXPECT_EQ(ChooseStartMap(Placement(), {ShardMap{}, ShardMap{}, std::nullopt}, &none),
            StartingMap(Placement()));
  EXPECT_TRUE(none.empty());
}

TEST(ShardMasterTest, AMapOnTheWireIsCheckedBeforeItIsTaken) {
  const ShardMap map = Map(4, {{1}, {1, 2}, {2, 0}}, {{0}, {}, {}});
  wire::Message m;
  m.map_epoch = 4;
  m.chains = wire::ChainsOf(map);
  Result<ShardMap> back = wire::MapOfMessage(m, 3, 3);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back.value(), map);
  m.chains[2].tasks.push_back(2);  // twice in one shard
  EXPECT_EQ(wire::MapOfMessage(m, 3, 3).status().code(), StatusCode::kInvalidArgument);
  m.chains.pop_back();  // a shard missing
  EXPECT_NE(wire::MapOfMessage(m, 3, 3).status().message().find("one chain per shard"),
            std::string::npos);
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
