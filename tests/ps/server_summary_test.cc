// A server's TensorBoard scalars (ps/server_summary.h), with the server driven through Handle()
// and the intervals' clock given by the test, read back from the event file: each scalar is
// what was sent, to the request and the byte. tests/distributed/ps_summary_process_test.cc
// runs real servers and shows an unbalanced shard.
#include "ps/server_summary.h"

#include <gtest/gtest.h>

#include <map>

#include "common/wire/request.h"
#include "ps/server.h"
#include "tests/ps/server_test_util.h"
#include "tests/summary/event_test_util.h"

namespace pstrain {
namespace ps {
namespace {

using wire::Message;
using wire::MessageType;
using Clock = std::chrono::steady_clock;

constexpr int64_t kFloats = 64;  // "w": 256 bytes a tensor

std::unique_ptr<ParameterServer> MakeServer(UpdateMode mode, int workers,
                                            int64_t max_staleness = 0) {
  ServerOptions o;
  o.mode = mode;
  o.num_workers = workers;
  o.max_staleness = max_staleness;
  o.cluster = {workers, 0};
  return InitializedSgdServer(o, {{"w", Tensor::Filled(Shape{kFloats}, 1.0f)}}, 1, "c0");
}

// From process incarnation 10 + task.
Message Request(MessageType type, int task, const std::string& role = "worker") {
  return wire::Request(type, role, task, 10 + task);
}

Message Push(int task, uint64_t sequence, int64_t computed_at) {
  Message m = Request(MessageType::kPush, task);
  m.sequence = sequence;
  m.step = computed_at;
  m.tensors.push_back({"w", Tensor::Filled(Shape{kFloats}, 0.01f)});
  return m;
}

// Every scalar of the one event file in <logdir>/ps-<task>: tag -> the values, in order.
std::map<std::string, std::vector<float>> ReadScalars(const std::string& logdir, int task,
                                                      std::vector<int64_t>* steps = nullptr) {
  std::map<std::string, std::vector<float>> out;
  const auto files = EventFiles(logdir + "/" + ServerSummary::Subdir(task));
  EXPECT_EQ(files.size(), 1u);
  if (files.size() != 1) return out;
  auto events = ReadEvents(files[0]);
  EXPECT_TRUE(events.ok()) << events.status().ToString();
  if (!events.ok()) return out;
  for (const auto& e : events.value()) {
    for (const auto& v : e.summary().value()) {
      out[v.tag()].push_back(v.simple_value());
      if (steps != nullptr && v.tag() == "ps/pushes_total") steps->push_back(e.step());
    }
  }
  return out;
}

TEST(ServerSummaryTest, SevenPushesOfKnownSizeAreSevenPushesAndTheirBytesIn) {
  const ScopedLogdir logdir("ps_summary");
  const auto t0 = Clock::now();
  auto summary = ServerSummary::Open(logdir.path(), 3, 2.0, t0);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  auto server = MakeServer(UpdateMode::kAsync, 2);
  EXPECT_FALSE((*summary)->Due(t0 + std::chrono::milliseconds(1999)));
  EXPECT_TRUE((*summary)->Due(t0 + std::chrono::seconds(2)));

  // Worker 1 computed all seven from step 0: 0, 1, ... 6 updates behind when each arrives.
  for (int i = 0; i < 7; ++i) {
    ASSERT_EQ(server->Handle("w1", Push(1, i + 1, 0)).at(0).message.type, MessageType::kOk);
  }
  for (int i = 0; i < 3; ++i) server->Handle("w1", Request(MessageType::kPull, 1));
  // An evaluator may not stop the cluster: refused, and counted.
  EXPECT_EQ(server->Handle("e0", Request(MessageType::kShutdown, 0, "evaluator"))
                .at(0)
                .message.error_code,
            StatusCode::kPermissionDenied);
  (*summary)->Write(server->stats(), server->TakeHighs(), server->global_step(),
                    server->pending_requests(), t0 + std::chrono::seconds(2));
  // A quiet interval.
  (*summary)->Write(server->stats(), server->TakeHighs(), server->global_step(),
                    server->pending_requests(), t0 + std::chrono::seconds(4));
  ASSERT_TRUE((*summary)->Close().ok());

  std::vector<int64_t> steps;
  auto s = ReadScalars(logdir.path(), 3, &steps);
  EXPECT_EQ(steps, (std::vector<int64_t>{7, 7}));  // the server's global step
  const float bytes = kFloats * 4;
  EXPECT_EQ(s["ps/pushes_total"], (std::vector<float>{7, 7}));
  EXPECT_EQ(s["ps/pushes_per_sec"], (std::vector<float>{3.5f, 0}));
  EXPECT_EQ(s["ps/updates_per_sec"], (std::vector<float>{3.5f, 0}));
  EXPECT_EQ(s["ps/pulls_total"], (std::vector<float>{3, 3}));
  EXPECT_EQ(s["ps/pulls_per_sec"], (std::vector<float>{1.5f, 0}));
  // In: the chief's initial values and seven pushes; out: three pulls.
  EXPECT_EQ(s["ps/bytes_in_total"], (std::vector<float>{8 * bytes, 8 * bytes}));
  EXPECT_EQ(s["ps/bytes_in_per_sec"], (std::vector<float>{8 * bytes / 2, 0}));
  EXPECT_EQ(s["ps/bytes_out_total"], (std::vector<float>{3 * bytes, 3 * bytes}));
  EXPECT_EQ(s["ps/bytes_out_per_sec"], (std::vector<float>{3 * bytes / 2, 0}));
  EXPECT_EQ(s["ps/staleness"], (std::vector<float>{3, 0}));
  EXPECT_EQ(s["ps/staleness_max"], (std::vector<float>{6, 0}));
  EXPECT_EQ(s["ps/refused"], (std::vector<float>{1, 0}));
  EXPECT_EQ(s["ps/rejected"], (std::vector<float>{0, 0}));
  EXPECT_EQ(s["ps/dropped_stale"], (std::vector<float>{0, 0}));
  ASSERT_EQ(s["ps/apply_ms"].size(), 2u);
  EXPECT_GT(s["ps/apply_ms"][0], 0);
  EXPECT_GE(s["ps/apply_ms_max"][0], s["ps/apply_ms"][0]);
  EXPECT_EQ(s["ps/apply_ms"][1], 0);  // no update in it
  EXPECT_EQ(s["ps/apply_ms_max"][1], 0);
}

TEST(ServerSummaryTest, HeldRequestsAndDroppedStaleGradientsAreCounted) {
  const ScopedLogdir logdir("ps_summary");
  const auto t0 = Clock::now();
  auto summary = ServerSummary::Open(logdir.path(), 0, 1.0, t0);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  auto server = MakeServer(UpdateMode::kSync, 2);
  // Worker 0's push and pull wait for worker 1's push, which releases both.
  EXPECT_TRUE(server->Handle("w0", Push(0, 1, 0)).empty());
  EXPECT_TRUE(server->Handle("w0", Request(MessageType::kPull, 0)).empty());
  EXPECT_EQ(server->Handle("w1", Push(1, 1, 0)).size(), 3u);
  // Worker 1 again from step 0, now one update behind (max_staleness 0): dropped.
  EXPECT_EQ(server->Handle("w1", Push(1, 2, 0)).at(0).message.value, -1);
  // Worker 0 waits again at the end of the interval.
  EXPECT_TRUE(server->Handle("w0", Push(0, 2, 1)).empty());
  (*summary)->Write(server->stats(), server->TakeHighs(), server->global_step(),
                    server->pending_requests(), t0 + std::chrono::seconds(1));
  ASSERT_TRUE((*summary)->Close().ok());

  auto s = ReadScalars(logdir.path(), 0);
  EXPECT_EQ(s["ps/pending_requests_max"], (std::vector<float>{2}));
  EXPECT_EQ(s["ps/pending_requests"], (std::vector<float>{1}));
  EXPECT_EQ(s["ps/dropped_stale"], (std::vector<float>{1}));
  EXPECT_EQ(s["ps/pushes_total"], (std::vector<float>{4}));  // taken or dropped, each counted
  EXPECT_EQ(s["ps/updates_per_sec"], (std::vector<float>{1}));
  EXPECT_EQ(s["ps/staleness"], (std::vector<float>{0}));  // of the three taken
}

TEST(ServerSummaryTest, AnIntervalOfNoneIsRefused) {
  const ScopedLogdir logdir("ps_summary");
  auto summary = ServerSummary::Open(logdir.path(), 0, 0, Clock::now());
  ASSERT_FALSE(summary.ok());
  EXPECT_NE(summary.status().message().find("--ps_summary_secs"), std::string::npos);
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
