// Barriers alone (ps/barriers.h): the cluster's count, a retry counted once, waits elsewhere
// kept, the bound per participant, and the waits handed back when a head steps down.
#include "ps/barriers.h"

#include <gtest/gtest.h>

namespace pstrain {
namespace ps {
namespace {

wire::Message Wait(const std::string& role, int task, const std::string& name, int64_t count) {
  wire::Message m;
  m.type = wire::MessageType::kBarrier;
  m.role = role;
  m.task_index = task;
  m.text = name;
  m.value = count;
  return m;
}

TEST(BarriersTest, ABarrierReleasesOnceTheClustersCountHasArrivedEachCountedOnce) {
  Barriers barriers(ClusterSize{2, 1}, /*elastic=*/false);
  const auto complete = [&](const std::vector<Barriers::Wait>& w) {
    return barriers.FixedCountReached(w);
  };
  EXPECT_TRUE(barriers.Arrive("w1", Wait("worker", 1, "done", 3), complete)->empty());
  EXPECT_TRUE(barriers.Arrive("w1-again", Wait("worker", 1, "done", 3), complete)->empty())
      << "a retry counts once";
  EXPECT_TRUE(barriers.Arrive("w1", Wait("worker", 1, "elsewhere", 3), complete)->empty());
  EXPECT_TRUE(barriers.Arrive("e0", Wait("evaluator", 0, "done", 3), complete)->empty());
  EXPECT_EQ(barriers.waiting(), 3u);
  auto released = barriers.Arrive("chief", Wait("chief", 0, "done", 3), complete);
  ASSERT_TRUE(released.ok());
  ASSERT_EQ(released->size(), 3u);
  EXPECT_EQ((*released)[0].peer, "w1-again") << "the latest connection is answered";
  EXPECT_EQ(barriers.waiting(), 1u) << "worker 1's wait elsewhere stays";
  EXPECT_EQ(barriers.TakeAll().size(), 1u);
  EXPECT_EQ(barriers.waiting(), 0u);
}

TEST(BarriersTest, ACountThatDisagreesAnUnknownEvaluatorAndAFifthWaitAreRefused) {
  Barriers barriers(ClusterSize{2, 1}, /*elastic=*/false);
  const auto never = [](const std::vector<Barriers::Wait>&) { return false; };
  auto wrong = barriers.Arrive("w1", Wait("worker", 1, "done", 1), never);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("waits for the cluster's 3 tasks"), std::string::npos)
      << wrong.status().ToString();
  auto stranger = barriers.Arrive("e5", Wait("evaluator", 5, "done", 3), never);
  ASSERT_FALSE(stranger.ok());
  EXPECT_EQ(stranger.status().code(), StatusCode::kPermissionDenied);
  for (const char* name : {"a", "b", "c", "d"}) {
    ASSERT_TRUE(barriers.Arrive("w1", Wait("worker", 1, name, 3), never).ok()) << name;
  }
  auto fifth = barriers.Arrive("w1", Wait("worker", 1, "e", 3), never);
  ASSERT_FALSE(fifth.ok());
  EXPECT_EQ(fifth.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(barriers.waiting(), 4u);
  // Elastic: the request's count is not the server's business (live workers count).
  Barriers elastic(ClusterSize{2, 1}, /*elastic=*/true);
  EXPECT_TRUE(elastic.Arrive("w1", Wait("worker", 1, "done", 7), never).ok());
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
