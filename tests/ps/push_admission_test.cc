// A push's checks before the update policy (ps/push_admission.h): one step per pull, its fields,
// a retry answered from the cache without its contents looked at, its contents refused naming
// the sender and step, and an outlier scaled down; each driven on a peer table alone.
#include "ps/push_admission.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "common/wire/request.h"
#include "tests/ps/sgd_store.h"

namespace pstrain {
namespace ps {
namespace {

using wire::Message;

// worker 1's push number `sequence` from process `incarnation`, computed at step 5.
Message Push(uint64_t sequence, float w, uint64_t incarnation = 7) {
  Message m = wire::Request(wire::MessageType::kPush, "worker", 1, incarnation);
  m.sequence = sequence;
  m.step = 5;
  m.tensors.push_back({"w", Tensor::Filled(Shape{4}, w)});
  return m;
}

// A peer table where worker 1 (process 7) had push 3 taken and has not pulled since.
Peers AfterPushThree() {
  Peers peers;
  PeerState& p = peers["worker 1"];
  p.incarnation = 7;
  p.last_push_sequence = 3;
  p.last_push_reply.request_id = 30;
  p.last_push_reply.text = "push 3's reply";
  p.last_push_record = 12;
  p.pulled = false;
  return peers;
}

PushAdmissionOptions Options(bool one_push_per_pull = false, int outlier_binades = 0) {
  return {"ps 0", one_push_per_pull, outlier_binades, /*takes_parts=*/false, "sync"};
}

bool Mentions(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

TEST(PushAdmissionTest, ARetryIsAnsweredFromTheCacheWithoutItsContentsLookedAt) {
  auto store = SgdStoreWithWAndMean();
  Peers peers = AfterPushThree();
  PushAdmission admission(Options(), peers);
  Message retry = Push(3, NAN);
  retry.request_id = 31;
  PushVerdict cached = admission.Check(*store, retry);
  ASSERT_EQ(cached.kind, PushVerdict::Kind::kRetry)
      << "push 3 was taken: its retry is not checked again";
  EXPECT_EQ(cached.reply.text, "push 3's reply");
  EXPECT_EQ(cached.reply.request_id, 31u) << "answers the retry";
  EXPECT_EQ(cached.record, 12);
  EXPECT_EQ(admission.Check(*store, Push(2, 1.0f)).kind, PushVerdict::Kind::kRetry);
  // Another process of the same name is no retry: its NaN is refused, naming sender and step.
  PushVerdict other = admission.Check(*store, Push(3, NAN, /*incarnation=*/8));
  ASSERT_EQ(other.kind, PushVerdict::Kind::kRefuse);
  EXPECT_TRUE(Mentions(other.why, "worker 1's push of step 5 refused: ")) << other.why.message();
  PushVerdict next = admission.Check(*store, Push(4, 1.0f));
  ASSERT_EQ(next.kind, PushVerdict::Kind::kTake) << next.why.message();
  ASSERT_EQ(next.contents.gradients.size(), 1u);
  EXPECT_EQ(next.contents.gradients[0].first, "w");
}

TEST(PushAdmissionTest, FieldsAreRefusedBeforeTheRetryCacheIsAsked) {
  auto store = SgdStoreWithWAndMean();
  Peers peers = AfterPushThree();
  PushAdmission admission(Options(), peers);
  PushVerdict unnumbered = admission.Check(*store, Push(0, 1.0f));
  EXPECT_EQ(unnumbered.kind, PushVerdict::Kind::kRefuse);
  EXPECT_TRUE(Mentions(unnumbered.why, "incarnation and sequence")) << unnumbered.why.message();
  PushVerdict skips = admission.Check(*store, Push(5, 1.0f));
  EXPECT_EQ(skips.kind, PushVerdict::Kind::kRefuse);
  EXPECT_TRUE(Mentions(skips.why, "skips ahead")) << skips.why.message();
  // A retry in parts, to a policy that counts whole pushes, is refused for its parts.
  Message in_parts = Push(3, 1.0f);
  in_parts.value = 2;
  PushVerdict parts = admission.Check(*store, in_parts);
  EXPECT_EQ(parts.kind, PushVerdict::Kind::kRefuse);
  EXPECT_TRUE(Mentions(parts.why, "this server runs sync")) << parts.why.message();
}

TEST(PushAdmissionTest, ANewStepWithoutAPullIsRefusedAndRetriesPass) {
  Peers peers = AfterPushThree();
  PushAdmission paced(Options(/*one_push_per_pull=*/true), peers);
  Status next = paced.Pace(Push(4, 1.0f), /*held=*/false);
  EXPECT_EQ(next.code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(Mentions(next, "no pull from this server")) << next.message();
  EXPECT_TRUE(paced.Pace(Push(3, 1.0f), false).ok()) << "a retry of push 3";
  EXPECT_TRUE(paced.Pace(Push(4, 1.0f), /*held=*/true).ok()) << "a retry of a held push";
  EXPECT_TRUE(paced.Pace(Push(9, 1.0f), false).ok()) << "refused for its fields later instead";
  EXPECT_FALSE(paced.Pace(Push(4, 1.0f, /*incarnation=*/8), false).ok())
      << "another process's push 4 is no retry";
  peers["worker 1"].pulled = true;
  EXPECT_TRUE(paced.Pace(Push(4, 1.0f), false).ok()) << "after a pull";
  Peers unpaced_peers = AfterPushThree();
  PushAdmission unpaced(Options(/*one_push_per_pull=*/false), unpaced_peers);
  EXPECT_TRUE(unpaced.Pace(Push(4, 1.0f), false).ok()) << "pacing off";
}

TEST(PushAdmissionTest, AnOutlierIsScaledToTheBoundAndAnOrdinaryPushIsNot) {
  auto store = SgdStoreWithWAndMean();
  Peers peers = AfterPushThree();
  PushAdmission guarded(Options(false, /*outlier_binades=*/10), peers);
  PushAdmission unguarded(Options(false, 0), peers);
  const float ordinary = std::ldexp(1.0f, -7);
  for (size_t i = 0; i < MagnitudeGuard::kWarmup; ++i) {
    PushVerdict v = guarded.Check(*store, Push(4, ordinary));
    ASSERT_EQ(v.kind, PushVerdict::Kind::kTake) << v.why.message();
    EXPECT_FALSE(guarded.ScaleOutlier(Push(4, ordinary), &v.contents)) << "push " << i;
  }
  const Message outlier = Push(4, std::ldexp(1.0f, 20));
  PushVerdict wild = guarded.Check(*store, outlier);
  ASSERT_EQ(wild.kind, PushVerdict::Kind::kTake);
  PushVerdict wild_unguarded = unguarded.Check(*store, outlier);
  EXPECT_TRUE(guarded.ScaleOutlier(outlier, &wild.contents));
  EXPECT_EQ(wild.contents.gradients[0].second[0], std::ldexp(1.0f, 3))
      << "2^20 brought down to the median 2^-7, ten binades up";
  EXPECT_EQ(outlier.tensors[0].tensor[0], std::ldexp(1.0f, 20)) << "the received frame as it came";
  EXPECT_FALSE(unguarded.ScaleOutlier(outlier, &wild_unguarded.contents)) << "guard off";
  EXPECT_EQ(wild_unguarded.contents.gradients[0].second[0], std::ldexp(1.0f, 20));
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
