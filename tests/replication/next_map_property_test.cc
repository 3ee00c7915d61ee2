// NextMap and PromoteJoiner over random kill, restart and caught-up scripts: whatever the order
// of events, a chain never holds a task twice, a head is a live member, heads are never handed
// back, and epochs only rise.
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/replication/shard_map.h"

namespace pstrain {
namespace replication {
namespace {

bool Contains(const std::vector<int>& tasks, int task) {
  return std::find(tasks.begin(), tasks.end(), task) != tasks.end();
}

TEST(NextMapPropertyTest, RandomScriptsKeepChainsDistinctHeadsMembersAndEpochsRising) {
  // Random hosts often share one, and PlaceReplicas warns of it once per shard of each script.
  const int minloglevel = FLAGS_minloglevel;
  FLAGS_minloglevel = google::GLOG_ERROR;
  for (int script = 0; script < 1000; ++script) {
    std::mt19937 rng(script);
    const int tasks = 3 + static_cast<int>(rng() % 3);
    const int replicas = 1 + static_cast<int>(rng() % 2);
    std::vector<std::string> hosts;
    for (int t = 0; t < tasks; ++t) hosts.push_back("h" + std::to_string(rng() % 3) + ":2222");
    const ShardMap placement = PlaceReplicas(hosts, replicas).value();
    ShardMap map = placement;
    std::vector<bool> up(tasks, true);
    std::string trace = map.Describe();
    for (int event = 0; event < 40; ++event) {
      const ShardMap before = map;
      std::vector<TaskHealth> health(tasks);
      for (int t = 0; t < tasks; ++t) health[t] = up[t] ? TaskHealth::kUp : TaskHealth::kDown;
      const int t = static_cast<int>(rng() % tasks);
      std::vector<int> fresh;
      switch (rng() % 3) {
        case 0:  // kill
          up[t] = false;
          health[t] = TaskHealth::kDown;
          break;
        case 1:  // the launcher restarts it
          health[t] = up[t] ? TaskHealth::kRestarted : TaskHealth::kUp;
          up[t] = true;
          break;
        default: {  // a joiner catches up
          std::vector<std::pair<int, int>> joiners;
          for (int s = 0; s < map.num_shards(); ++s) {
            for (int j : map.joining[s]) joiners.emplace_back(s, j);
          }
          if (joiners.empty()) continue;
          const auto [s, j] = joiners[rng() % joiners.size()];
          auto promoted = PromoteJoiner(map, s, j);
          ASSERT_TRUE(promoted.ok()) << promoted.status().ToString() << "\n" << trace;
          map = *promoted;
          trace += "\npromote ps" + std::to_string(j) + " in shard " + std::to_string(s) + "\n" +
                   map.Describe();
          ASSERT_EQ(map.epoch, before.epoch + 1) << trace;
          continue;
        }
      }
      auto change = NextMap(map, health, placement);
      ASSERT_TRUE(change.ok()) << change.status().ToString() << "\n" << trace;
      map = change->map;
      fresh = change->fresh;
      trace += "\nps" + std::to_string(t) + (up[t] ? " up" : " down") + "\n" + map.Describe();

      if (map.chains == before.chains && map.joining == before.joining) {
        ASSERT_EQ(map.epoch, before.epoch) << trace;
      } else {
        ASSERT_EQ(map.epoch, before.epoch + 1) << trace;
      }
      for (int s = 0; s < map.num_shards(); ++s) {
        std::vector<int> all = map.chains[s];
        all.insert(all.end(), map.joining[s].begin(), map.joining[s].end());
        ASSERT_EQ(std::set<int>(all.begin(), all.end()).size(), all.size())
            << "shard " << s << " holds a task twice\n"
            << trace;
        for (int task : all) ASSERT_TRUE(up[task]) << "ps" << task << " is down\n" << trace;
        if (!map.joining[s].empty()) {
          ASSERT_FALSE(map.chains[s].empty()) << "joiners with no one to copy from\n" << trace;
        }
        const int head = map.head(s);
        if (head < 0) continue;
        ASSERT_EQ(head, map.chains[s].front()) << trace;
        const bool is_fresh = Contains(fresh, s);
        if (!is_fresh) {
          // A head held the shard before: it was a member, never a joiner of it.
          ASSERT_TRUE(Contains(before.chains[s], head)) << "shard " << s << "\n" << trace;
          // A live head keeps its shard.
          const int old = before.head(s);
          if (old >= 0 && health[old] == TaskHealth::kUp) {
            ASSERT_EQ(head, old) << trace;
          }
        } else {
          // Started afresh only when no member of the shard survived.
          for (int member : before.chains[s]) {
            ASSERT_NE(health[member], TaskHealth::kUp) << "shard " << s << "\n" << trace;
          }
          ASSERT_EQ(map.chains[s].size(), 1u) << trace;
        }
      }
    }
  }
  FLAGS_minloglevel = minloglevel;
}

}  // namespace
}  // namespace replication
}  // namespace pstrain
