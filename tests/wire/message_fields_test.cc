// Each request type carries only its own fields: a field of another type is refused by name,
// so that no field is read as something else (a push's sequence as a broadcast root).
#include "common/wire/message_fields.h"

#include <gtest/gtest.h>

namespace pstrain {
namespace wire {
namespace {

Message Of(MessageType type) {
  Message m;
  m.type = type;
  m.role = "worker";  // the envelope is every type's
  m.task_index = 1;
  m.incarnation = 5;
  m.request_id = 9;
  return m;
}

TEST(MessageFieldsTest, EachRequestTypeMayCarryItsOwnFields) {
  Message push = Of(MessageType::kPush);
  push.step = 3;
  push.sequence = 4;
  push.tensors = {{"w", Tensor::Filled(Shape{2}, 1)}, {"bn/mean", Tensor::Filled(Shape{1}, 0)}};
  push.assigns = {"bn/mean"};
  EXPECT_TRUE(CheckRequestFields(push).ok()) << CheckRequestFields(push).ToString();
  Message collective = Of(MessageType::kCollective);
  collective.text = "broadcast";
  collective.value = 4;
  collective.step = 7;
  collective.root = 1;
  collective.tensors = {{"in", Tensor::Filled(Shape{4}, 1)}};
  EXPECT_TRUE(CheckRequestFields(collective).ok());
  Message restore = Of(MessageType::kRestore);
  restore.step = 200;
  EXPECT_TRUE(CheckRequestFields(restore).ok());
  EXPECT_TRUE(CheckRequestFields(Of(MessageType::kShutdown)).ok());
}

TEST(MessageFieldsTest, AFieldOfAnotherTypeIsRefusedByName) {
  struct Case {
    MessageType type;
    void (*set)(Message*);
    std::string expected;
  };
  const std::vector<Case> cases = {
      {MessageType::kPull, [](Message* m) { m->sequence = 1; }, "a pull carries no 'sequence'"},
      {MessageType::kPull,
       [](Message* m) {
         m->tensors = {{"w", Tensor::Filled(Shape{1}, 1)}};
       },
       "a pull carries no 'tensors'"},
      {MessageType::kPush, [](Message* m) { m->names = {"w"}; }, "a push carries no 'names'"},
      {MessageType::kPush, [](Message* m) { m->root = 2; }, "a push carries no 'root'"},
      {MessageType::kCollective, [](Message* m) { m->sequence = 2; },
       "a collective carries no 'sequence'"},
      {MessageType::kRegister, [](Message* m) { m->text = "restore"; },
       "a register carries no 'text'"},
      {MessageType::kShutdown, [](Message* m) { m->step = 1; }, "a shutdown carries no 'step'"},
      {MessageType::kHeartbeat, [](Message* m) { m->steps = {1}; },
       "a heartbeat carries no 'steps'"},
      {MessageType::kRestore,
       [](Message* m) {
         m->tensors = {{"w", Tensor::Filled(Shape{1}, 1)}};
       },
       "a restore carries no 'tensors'"},
      {MessageType::kBarrier, [](Message* m) { m->error_code = StatusCode::kInternal; },
       "a barrier carries no 'errorCode'"},
  };
  for (const Case& c : cases) {
    Message m = Of(c.type);
    c.set(&m);
    const Status s = CheckRequestFields(m);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.expected;
    EXPECT_NE(s.message().find(c.expected), std::string::npos) << s.message();
  }
}

// A record as a head sends it (docs/replication.md, section 2).
Message Record() {
  Message m = Of(MessageType::kReplicate);
  m.role = "ps";
  m.shard = 1;
  m.map_epoch = 2;
  m.sequence = 11;
  m.step = 10;
  m.tensors = {{"w", Tensor::Filled(Shape{2}, 1)}, {"bn/mean", Tensor::Filled(Shape{1}, 0)}};
  m.assigns = {"bn/mean"};
  m.pushes = {{"worker", 1, 5, 3, 11, 0, ""}};
  m.uses = {{0, 4, 128}};
  return m;
}

TEST(MessageFieldsTest, TheReplicationRequestsMayCarryTheirOwnFields) {
  EXPECT_TRUE(CheckRequestFields(Record()).ok()) << CheckRequestFields(Record()).ToString();
  Message copy = Of(MessageType::kReplicaCopy);
  copy.shard = 0;
  copy.sequence = 40;
  copy.tensors = {{"w", Tensor::Filled(Shape{2}, 1)}, {"w/Adam", Tensor::Filled(Shape{2}, 0)}};
  copy.pushes = {{"chief", 0, 7, 12, 40, 0, ""}};
  copy.uses = {{1, 0, 1024}};
  copy.text = "fingerprint";
  EXPECT_TRUE(CheckRequestFields(copy).ok()) << CheckRequestFields(copy).ToString();
  Message set = Of(MessageType::kShardMap);
  set.map_epoch = 3;
  set.chains = {{0, {0, 1}, {}}, {1, {1}, {0}}};
  EXPECT_TRUE(CheckRequestFields(set).ok());
  EXPECT_TRUE(CheckRequestFields(Of(MessageType::kShardMap)).ok()) << "a get carries nothing";
  Message lease = Of(MessageType::kDataLease);
  lease.value = 2;
  EXPECT_TRUE(CheckRequestFields(lease).ok());
  Message push = Of(MessageType::kPush);
  push.sequence = 1;
  push.tensors = {{"w", Tensor::Filled(Shape{2}, 1)}};
  push.uses = {{0, 4, 64}, {0, 5, 64}};
  EXPECT_TRUE(CheckRequestFields(push).ok()) << "a push to shard 0 records its examples' use";
}

TEST(MessageFieldsTest, AReplicateCarryingAPushFieldIsRefused) {
  struct Case {
    MessageType type;
    void (*set)(Message*);
    std::string expected;
  };
  const std::vector<Case> cases = {
      {MessageType::kReplicate, [](Message* m) { m->root = 1; }, "a replicate carries no 'root'"},
      {MessageType::kReplicate,
       [](Message* m) {
         m->chains = {{0, {0}, {}}};
       },
       "a replicate carries no 'chains'"},
      {MessageType::kReplicate, [](Message* m) { m->names = {"w"}; },
       "a replicate carries no 'names'"},
      {MessageType::kPush, [](Message* m) { m->link = "l"; }, "a push carries no 'link'"},
      {MessageType::kPush,
       [](Message* m) {
         m->chains = {{0, {0}, {}}};
       },
       "a push carries no 'chains'"},
      {MessageType::kPush,
       [](Message* m) {
         m->pushes = {{"worker", 1, 5, 3, 0, 0, ""}};
       },
       "a push carries no 'pushes'"},
      {MessageType::kReplicaCopy, [](Message* m) { m->step = 3; },
       "a replica copy carries no 'step'"},
      {MessageType::kShardMap,
       [](Message* m) {
         m->uses = {{0, 1, 2}};
       },
       "a shard map carries no 'uses'"},
      {MessageType::kDataLease, [](Message* m) { m->sequence = 1; },
       "a data lease carries no 'sequence'"},
      {MessageType::kPull,
       [](Message* m) {
         m->uses = {{0, 1, 2}};
       },
       "a pull carries no 'uses'"},
  };
  for (const Case& c : cases) {
    Message m = c.type == MessageType::kReplicate ? Record() : Of(c.type);
    c.set(&m);
    const Status s = CheckRequestFields(m);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.expected;
    EXPECT_NE(s.message().find(c.expected), std::string::npos) << s.message();
  }
  Message record = Record();
  record.assigns = {"bn/variance"};
  EXPECT_NE(CheckRequestFields(record).message().find(
                "the replicate assigns 'bn/variance' but carries no tensor of that name"),
            std::string::npos);
}

TEST(MessageFieldsTest, APushAssignsOnlyTensorsItCarriesAndRepliesAreNoRequests) {
  Message push = Of(MessageType::kPush);
  push.tensors = {{"w", Tensor::Filled(Shape{2}, 1)}};
  push.assigns = {"conv1/weights"};
  EXPECT_NE(CheckRequestFields(push).message().find(
                "the push assigns 'conv1/weights' but carries no tensor of that name"),
            std::string::npos);
  EXPECT_NE(CheckRequestFields(Of(MessageType::kOk)).message().find("ok is a reply, not a request"),
            std::string::npos);
}

}  // namespace
}  // namespace wire
}  // namespace pstrain
