// The host hub's own promises: a rank that never comes fails the others in time, naming it; a
// malformed or inconsistent request gets an error naming what was wrong and leaves the hub
// serving; a rank that restarts (a new process) fails the group instead of mixing its calls
// with the old ones.
#include "worker/distributed/collectives/host_hub.h"

#include <gtest/gtest.h>

#include <thread>

#include "worker/distributed/collectives/hub_collectives.h"
#include "worker/distributed/collectives/hub_state.h"

namespace pstrain {
namespace {

using std::chrono::milliseconds;
using wire::Message;
using wire::MessageType;

std::unique_ptr<HostHub> StartHub(int size, milliseconds timeout = milliseconds(60000),
                                  milliseconds rank_silence_limit = milliseconds(5000)) {
  HostHubOptions options;
  options.size = size;
  options.timeout = timeout;
  options.rank_silence_limit = rank_silence_limit;
  auto hub = HostHub::Start("tcp://127.0.0.1:0", options);
  CHECK(hub.ok()) << hub.status().ToString();
  return std::move(hub).value();
}

std::unique_ptr<HubCollectives> Rank(const std::string& endpoint, int rank, int size,
                                     milliseconds hub_silence_limit = milliseconds(5000)) {
  HubCollectivesOptions options;
  options.rank = rank;
  options.size = size;
  options.timeout = milliseconds(60000);
  options.heartbeat_interval = milliseconds(200);
  options.hub_silence_limit = hub_silence_limit;
  auto c = HubCollectives::Connect(endpoint, options);
  CHECK(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

// A hand-made collective request, as a buggy or foreign peer could send it.
Message RawCall(int rank, const std::string& op, int64_t n, int64_t number, uint64_t incarnation,
                int tensors, int64_t elements) {
  Message m;
  m.type = MessageType::kCollective;
  m.role = "rank";
  m.task_index = rank;
  m.text = op;
  m.value = n;
  m.step = number;
  m.incarnation = incarnation;
  for (int i = 0; i < tensors; ++i) m.tensors.push_back({"in", Tensor::Filled(Shape{elements}, 1)});
  return m;
}

TEST(HostHubTest, ARequestNamingARankThatIsNotItsKeysIsRefused) {
  HostHubOptions options;
  options.size = 2;
  options.rank_keys = {"worker-2", "worker-3"};  // the host's workers 2 and 3
  HubState state(options);
  Message beat;
  beat.type = MessageType::kHeartbeat;
  beat.task_index = 1;
  beat.incarnation = 5;
  const auto now = HubState::Clock::now();
  for (const char* key : {"worker-2", "evaluator-0", "worker-9"}) {
    auto out = state.Handle("p", beat, now, key);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].message.type, MessageType::kError) << key << " was let speak for rank 1";
    EXPECT_EQ(out[0].message.error_code, StatusCode::kPermissionDenied);
    EXPECT_NE(out[0].message.text.find("names rank 1 but its key is " + std::string(key) + "'s"),
              std::string::npos)
        << out[0].message.text;
  }
  auto out = state.Handle("p", beat, now, "worker-3");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.type, MessageType::kOk);
}

TEST(HostHubTest, CallsAndStoreKeysAreBoundedWhateverARankSends) {
  HostHubOptions options;
  options.size = 2;  // rank 1 never comes, so every call of rank 0 waits
  HubState state(options);
  const auto now = HubState::Clock::now();
  size_t refused = 0;
  for (int64_t number = 0; number < 1000; ++number) {
    Message call = RawCall(0, "AllReduceAverage", 1, number, 5, 1, 1);
    call.request_id = static_cast<uint64_t>(number) + 1;
    for (const auto& o : state.Handle("p", call, now)) {
      refused += o.message.type == MessageType::kError &&
                 o.message.error_code == StatusCode::kResourceExhausted;
    }
  }
  EXPECT_EQ(refused, 1000 - HubState::kMaxPendingCalls);
  Message set;
  set.type = MessageType::kStoreSet;
  set.role = "rank";
  set.task_index = 0;
  set.text = "00";
  size_t stored = 0;
  for (int k = 0; k < 5000; ++k) {
    set.names = {"key" + std::to_string(k)};
    stored += state.Handle("p", set, now).at(0).message.type == MessageType::kOk;
  }
  EXPECT_EQ(stored, HubState::kMaxStoreKeys);
}

TEST(HostHubTest, ARankThatNeverJoinsFailsTheOthersNamingIt) {
  auto hub = StartHub(3, milliseconds(300));
  std::vector<Status> statuses(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto c = Rank(hub->endpoint(), r, 3);
      std::vector<float> data(5, 1.0f);
      statuses[r] = c->AllReduceAverage(data.data(), 5);
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : statuses) {
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
    EXPECT_NE(s.message().find("rank(s) 2 did not join"), std::string::npos) << s.message();
  }
}

TEST(HostHubTest, MalformedRequestsAreRefusedByNameAndTheHubKeepsServing) {
  auto hub = StartHub(2);
  auto raw = wire::Connection::Connect(hub->endpoint()).value();
  const uint64_t me = wire::ProcessIncarnation();
  struct Case {
    Message request;
    std::string expected;
  };
  std::vector<Case> cases = {
      {RawCall(7, "AllReduceAverage", 4, 0, me, 1, 4), "rank 7 is outside the hub's group of 2"},
      {RawCall(1, "Reduce", 4, 0, me, 1, 4), "unknown collective 'Reduce'"},
      {RawCall(1, "AllReduceAverage", 4, 0, me, 2, 4), "sent 2 tensors"},
  };
  for (Case& c : cases) {
    Result<Message> reply = raw->Call(c.request, milliseconds(5000));
    ASSERT_FALSE(reply.ok());
    EXPECT_EQ(reply.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(reply.status().message().find(c.expected), std::string::npos)
        << reply.status().message();
  }
  // A rank whose tensor does not hold n elements fails the whole call, on every rank.
  Status rank0;
  std::thread t([&] {
    auto c = Rank(hub->endpoint(), 0, 2);
    std::vector<float> data(4, 2.0f);
    rank0 = c->AllReduceAverage(data.data(), 4);
    if (!rank0.ok()) return;
  });
  Result<Message> short_input =
      raw->Call(RawCall(1, "AllReduceAverage", 4, 0, me, 1, 3), milliseconds(5000));
  t.join();
  ASSERT_FALSE(short_input.ok());
  EXPECT_NE(short_input.status().message().find("rank 1: sent 3 elements, expected 4"),
            std::string::npos)
      << short_input.status().message();
  EXPECT_EQ(rank0.code(), StatusCode::kInvalidArgument) << rank0.ToString();
  // The store part of the hub answers as before.
  Message set;
  set.type = MessageType::kStoreSet;
  set.names = {"k"};
  set.text = "00";
  EXPECT_TRUE(raw->Call(set, milliseconds(5000)).ok());
  // And a well-formed collective still completes.
  std::vector<float> got;
  std::thread t2([&] {
    auto c = Rank(hub->endpoint(), 0, 2);
    std::vector<float> data{1, 2};
    EXPECT_TRUE(c->AllReduceAverage(data.data(), 2).ok());
    got = data;
  });
  Result<Message> fine =
      raw->Call(RawCall(1, "AllReduceAverage", 2, 0, me, 1, 2), milliseconds(5000));
  t2.join();
  ASSERT_TRUE(fine.ok()) << fine.status().ToString();
  EXPECT_EQ(got, (std::vector<float>{1.0f, 1.5f}));
  EXPECT_EQ(fine->tensors.at(0).tensor[1], 1.5f);
}

TEST(HostHubTest, ARankThatRestartsFailsTheGroupInsteadOfMixingItsCalls) {
  auto hub = StartHub(2);
  auto old_process = wire::Connection::Connect(hub->endpoint()).value();
  auto new_process = wire::Connection::Connect(hub->endpoint()).value();
  Result<Message> waiting = Internal("unset");
  std::thread t([&] {
    waiting =
        old_process->Call(RawCall(1, "AllReduceAverage", 2, 5, 111, 1, 2), milliseconds(5000));
  });
  std::this_thread::sleep_for(milliseconds(200));  // the old process's call is at the hub first
  Result<Message> restarted =
      new_process->Call(RawCall(1, "AllReduceAverage", 2, 0, 222, 1, 2), milliseconds(5000));
  t.join();
  for (const Result<Message>* r : {&waiting, &restarted}) {
    ASSERT_FALSE(r->ok());
    EXPECT_EQ(r->status().code(), StatusCode::kFailedPrecondition) << r->status().ToString();
    EXPECT_NE(r->status().message().find("rank 1 of the host's workers restarted"),
              std::string::npos)
        << r->status().message();
  }
  auto rank0 = Rank(hub->endpoint(), 0, 2);
  std::vector<float> data(2, 1.0f);
  EXPECT_EQ(rank0->AllReduceAverage(data.data(), 2).code(), StatusCode::kFailedPrecondition);
}

TEST(HostHubTest, ARankWhoseProcessDiesFailsTheOthersWithinSecondsNamingIt) {
  auto hub = StartHub(3, milliseconds(60000), milliseconds(1000));
  auto dead = Rank(hub->endpoint(), 2, 3);
  std::this_thread::sleep_for(milliseconds(500));  // it heartbeats, then its process ends
  dead.reset();
  const auto start = std::chrono::steady_clock::now();
  std::vector<Status> statuses(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto c = Rank(hub->endpoint(), r, 3);
      std::vector<float> data(4, 1.0f);
      statuses[r] = c->AllReduceAverage(data.data(), 4);
    });
  }
  for (auto& t : threads) t.join();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(secs, 20.0) << "not the 60 s timeout";
  for (const Status& s : statuses) {
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
    EXPECT_NE(s.message().find("rank(s) 2 stopped heartbeating"), std::string::npos) << s.message();
  }
}

TEST(HostHubTest, RanksFailWithinSecondsWhenTheHubDies) {
  auto hub = StartHub(2);
  const std::string endpoint = hub->endpoint();
  auto rank = Rank(endpoint, 1, 2, milliseconds(1000));
  Status status;
  std::thread t([&] {
    std::vector<float> data(4, 1.0f);
    status = rank->AllReduceAverage(data.data(), 4);  // rank 0 never comes
  });
  std::this_thread::sleep_for(milliseconds(500));
  const auto start = std::chrono::steady_clock::now();
  hub.reset();  // the leader's process ends
  t.join();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(secs, 20.0) << "not the 60 s timeout";
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
  EXPECT_NE(status.message().find("has not answered heartbeats"), std::string::npos)
      << status.message();
}

}  // namespace
}  // namespace pstrain
