// Each update policy alone (ps/update_policy.h), against a shard that records what the policy
// asks of it: async applies every push and answers it; accumulate applies the window's mean once
// N pushes are in and drops stale ones; sync also holds its pushers' replies and their next pulls
// until the update they took part in is applied.
#include "ps/update_policy.h"

#include <gtest/gtest.h>

#include "common/config.h"

namespace pstrain {
namespace ps {
namespace {

using wire::Message;

class RecordingShard : public UpdateShard {
 public:
  int64_t global_step() const override { return step; }
  int required_pushes() const override { return required; }
  bool replicated() const override { return replicated_; }
  Status Apply(int64_t at, const NamedTensors& grads, VariableStore::Checked,
               NamedTensors* prepared) override {
    applied.push_back({at, grads});
    if (prepared != nullptr) *prepared = grads;
    return Status::OK();
  }
  void CountUpdate() override { ++step; }
  void NoteStaleness(int64_t) override {}
  ServerStats& mutable_stats() override { return stats; }
  Message Ok(const Message& request) const override {
    Message m;
    m.type = wire::MessageType::kOk;
    m.request_id = request.request_id;
    m.step = step;
    return m;
  }
  Message Refusal(const Message& request, const std::string&) override { return Ok(request); }
  Message PullReply(const Message& request) override {
    Message m = Ok(request);
    m.text = "pulled";
    return m;
  }
  wire::PushEntry RetryEntry(const Message& request, const Message&) override {
    wire::PushEntry e;
    e.sequence = request.sequence;
    return e;
  }
  void RememberPush(const Message&, const Message&, bool) override {}
  void Commit(Update update, std::vector<HeldReply> replies, const std::vector<std::string>&,
              std::vector<Outgoing>* out) override {
    commits.push_back(std::move(update));
    for (HeldReply& h : replies) out->push_back({h.peer, std::move(h.message)});
  }
  std::string Who(const Message& m) const override {
    return "worker " + std::to_string(m.task_index);
  }

  int64_t step = 0;
  int required = 2;
  bool replicated_ = false;
  ServerStats stats;
  std::vector<std::pair<int64_t, NamedTensors>> applied;
  std::vector<Update> commits;
};

std::unique_ptr<VariableStore> Store() {
  auto config = ConfigNode::Parse("{optimizer: {type: sgd}, learning_rate: {initial: 1.0}}", "t");
  auto store = VariableStore::FromConfig(*config).value();
  EXPECT_TRUE(store->AddVariable("w", Tensor::Filled(Shape{2}, 0.0f)).ok());
  return store;
}

Message Push(int task, int64_t computed_at, uint64_t id) {
  Message m;
  m.type = wire::MessageType::kPush;
  m.task_index = task;
  m.step = computed_at;
  m.request_id = id;
  m.sequence = id;
  return m;
}

PushContents Gradient(float g) {
  PushContents c;
  c.gradients.push_back({"w", Tensor::Filled(Shape{2}, g)});
  return c;
}

TEST(UpdatePolicyTest, AsyncAppliesAndAnswersEveryPushAtOnce) {
  RecordingShard shard;
  auto policy = UpdatePolicy::For(UpdateMode::kAsync, &shard, 0, "ps 0");
  std::vector<Outgoing> out;
  policy->Take("a", Push(0, 0, 1), Gradient(1.0f), &out);
  policy->Take("b", Push(1, 0, 2), Gradient(3.0f), &out);
  ASSERT_EQ(shard.applied.size(), 2u);
  EXPECT_EQ(shard.step, 2);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].peer, "b");
  EXPECT_TRUE(policy->TakesParts());
  EXPECT_EQ(policy->pending(), 0u);
}

TEST(UpdatePolicyTest, AccumulateAppliesTheMeanOnceNPushesAreInAndDropsStaleOnes) {
  RecordingShard shard;
  auto store = Store();
  auto policy = UpdatePolicy::For(UpdateMode::kAccumulate, &shard, 1, "ps 0");
  policy->Reset(*store);
  std::vector<Outgoing> out;
  policy->Take("a", Push(0, 0, 1), Gradient(1.0f), &out);
  EXPECT_TRUE(shard.applied.empty());
  EXPECT_FALSE(policy->window_empty());
  EXPECT_EQ(out.size(), 1u) << "accumulate answers a push as it is taken";
  policy->Take("b", Push(1, 0, 2), Gradient(3.0f), &out);
  ASSERT_EQ(shard.applied.size(), 1u);
  EXPECT_FLOAT_EQ(shard.applied[0].second[0].second[0], 2.0f) << "the mean of 1 and 3";
  EXPECT_EQ(shard.step, 1);
  EXPECT_TRUE(policy->window_empty());

  shard.step = 5;  // computed from 0, now at 5: older than max_staleness 1
  out.clear();
  policy->Take("a", Push(0, 0, 3), Gradient(1.0f), &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.value, -1) << "dropped";
  EXPECT_EQ(shard.stats.dropped_stale, 1);
  EXPECT_TRUE(policy->window_empty());
  EXPECT_FALSE(policy->TakesParts());
}

TEST(UpdatePolicyTest, SyncHoldsItsPushersRepliesAndNextPullsUntilTheUpdate) {
  RecordingShard shard;
  auto store = Store();
  auto policy = UpdatePolicy::For(UpdateMode::kSync, &shard, 0, "ps 0");
  policy->Reset(*store);
  std::vector<Outgoing> out;
  policy->Take("a", Push(0, 0, 1), Gradient(1.0f), &out);
  EXPECT_TRUE(out.empty()) << "the push's reply waits for the update";
  EXPECT_TRUE(policy->HoldPull("a", Push(0, 0, 7))) << "its sender's pull waits too";
  EXPECT_FALSE(policy->HoldPull("b", Push(1, 0, 8))) << "a sender with no push waiting";
  EXPECT_TRUE(policy->HoldRetry("a", Push(0, 0, 1)));
  EXPECT_EQ(policy->pending(), 3u);
  EXPECT_EQ(policy->waiting_pushers(), (std::vector<std::string>{"worker 0", "worker 0"}));

  policy->Take("b", Push(1, 0, 2), Gradient(3.0f), &out);
  ASSERT_EQ(shard.applied.size(), 1u);
  ASSERT_EQ(out.size(), 4u) << "both pushes, the retry and the pull";
  for (const Outgoing& o : out) EXPECT_EQ(o.message.step, 1) << "answered after the update";
  EXPECT_EQ(out[3].message.text, "pulled");
  EXPECT_EQ(policy->pending(), 0u);
}

TEST(UpdatePolicyTest, ANewHeadTakesNothingFromAnAbandonedWindow) {
  RecordingShard shard;
  shard.replicated_ = true;
  auto store = Store();
  auto policy = UpdatePolicy::For(UpdateMode::kAccumulate, &shard, 0, "ps 0");
  policy->Reset(*store);
  std::vector<Outgoing> out;
  policy->Take("a", Push(0, 0, 1), Gradient(100.0f), &out);
  EXPECT_TRUE(out.empty()) << "replicated, answered with the window's record";
  EXPECT_EQ(policy->TakeHeld().size(), 1u);
  EXPECT_TRUE(policy->window_empty());
  policy->Take("a", Push(0, 0, 2), Gradient(1.0f), &out);
  policy->Take("b", Push(1, 0, 3), Gradient(3.0f), &out);
  ASSERT_EQ(shard.applied.size(), 1u);
  EXPECT_FLOAT_EQ(shard.applied[0].second[0].second[0], 2.0f) << "the abandoned 100 is gone";
  ASSERT_EQ(shard.commits.size(), 1u);
  EXPECT_EQ(shard.commits[0].pushes.size(), 2u) << "the record answers the window's two pushes";
  EXPECT_EQ(out.size(), 2u);
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
