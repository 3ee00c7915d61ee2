// Each request type carries only its own fields: its struct in pstrain.capnp has no place for a
// field of another type, so Encode refuses such a message by name and a raw header cannot
// express it; no field is read as something else (a push's sequence as a broadcast root).
#include <capnp/schema.h>
#include <gtest/gtest.h>

#include "common/wire/codec.h"
#include "tests/wire/wire_test_util.h"

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

// Encode's verdict on `m`; when it encodes, it must decode to the same message.
Status ThroughTheWire(const Message& m) {
  Result<EncodedMessage> encoded = Encode(m);
  if (!encoded.ok()) return encoded.status();
  Result<Message> decoded = Decode(FramesOf(*encoded));
  EXPECT_TRUE(decoded.ok()) << decoded.status().ToString();
  if (decoded.ok()) ExpectSameMessage(m, *decoded);
  return decoded.status();
}

// The struct a type's fields travel in.
capnp::StructSchema StructOf(MessageType type) {
  switch (type) {
    case MessageType::kRegister:
      return capnp::Schema::from<schema::Register>();
    case MessageType::kPull:
      return capnp::Schema::from<schema::Pull>();
    case MessageType::kPush:
      return capnp::Schema::from<schema::Push>();
    case MessageType::kBarrier:
      return capnp::Schema::from<schema::Barrier>();
    case MessageType::kHeartbeat:
      return capnp::Schema::from<schema::Heartbeat>();
    case MessageType::kCheckpoint:
      return capnp::Schema::from<schema::Checkpoint>();
    case MessageType::kShutdown:
      return capnp::Schema::from<schema::Shutdown>();
    case MessageType::kRestore:
      return capnp::Schema::from<schema::Restore>();
    case MessageType::kShardMap:
      return capnp::Schema::from<schema::ShardMap>();
    case MessageType::kDataLease:
      return capnp::Schema::from<schema::DataLease>();
    case MessageType::kRowPull:
      return capnp::Schema::from<schema::RowPull>();
    case MessageType::kRowPush:
      return capnp::Schema::from<schema::RowPush>();
    case MessageType::kStoreSet:
      return capnp::Schema::from<schema::StoreSet>();
    case MessageType::kStoreGet:
      return capnp::Schema::from<schema::StoreGet>();
    case MessageType::kCollective:
      return capnp::Schema::from<schema::Collective>();
    case MessageType::kReplicate:
      return capnp::Schema::from<schema::Replicate>();
    case MessageType::kReplicaCopy:
      return capnp::Schema::from<schema::ReplicaCopy>();
    case MessageType::kOk:
    case MessageType::kError:
      return capnp::Schema::from<schema::Reply>();
  }
  return capnp::Schema::from<schema::Reply>();
}

struct Case {
  MessageType type;
  void (*set)(Message*);
  std::string expected;
  const char* field;  // as wire::Message and the other types' structs name it
};

// Each case: Encode refuses it naming the field, and the type's struct has no field of that name.
void ExpectEachRefused(const std::vector<Case>& cases, Message (*base)(MessageType)) {
  for (const Case& c : cases) {
    Message m = base(c.type);
    c.set(&m);
    const Status s = ThroughTheWire(m);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.expected;
    EXPECT_NE(s.message().find(c.expected), std::string::npos) << s.message();
    EXPECT_TRUE(StructOf(c.type).findFieldByName(c.field) == nullptr)
        << "a raw " << MessageTypeName(c.type) << " header can express '" << c.field << "'";
  }
}

TEST(CodecFieldsTest, EachRequestTypeMayCarryItsOwnFields) {
  Message push = Of(MessageType::kPush);
  push.step = 3;
  push.sequence = 4;
  push.tensors = {{"w", Tensor::Filled(Shape{2}, 1)}, {"bn/mean", Tensor::Filled(Shape{1}, 0)}};
  push.assigns = {"bn/mean"};
  EXPECT_TRUE(ThroughTheWire(push).ok()) << ThroughTheWire(push).ToString();
  Message collective = Of(MessageType::kCollective);
  collective.text = "broadcast";
  collective.value = 4;
  collective.step = 7;
  collective.root = 1;
  collective.tensors = {{"in", Tensor::Filled(Shape{4}, 1)}};
  EXPECT_TRUE(ThroughTheWire(collective).ok());
  Message restore = Of(MessageType::kRestore);
  restore.step = 200;
  EXPECT_TRUE(ThroughTheWire(restore).ok());
  EXPECT_TRUE(ThroughTheWire(Of(MessageType::kShutdown)).ok());
  for (MessageType type : AllMessageTypes()) {
    EXPECT_TRUE(ThroughTheWire(ExampleOf(type)).ok()) << MessageTypeName(type);
  }
}

TEST(CodecFieldsTest, AFieldOfAnotherTypeIsRefusedByNameAndHasNoPlaceInTheHeader) {
  ExpectEachRefused(
      {
          {MessageType::kPull, [](Message* m) { m->sequence = 1; }, "a pull carries no 'sequence'",
           "sequence"},
          {MessageType::kPull,
           [](Message* m) {
             m->tensors = {{"w", Tensor::Filled(Shape{1}, 1)}};
           },
           "a pull carries no 'tensors'", "tensors"},
          {MessageType::kPush, [](Message* m) { m->names = {"w"}; }, "a push carries no 'names'",
           "names"},
          {MessageType::kPush, [](Message* m) { m->root = 2; }, "a push carries no 'root'", "root"},
          {MessageType::kCollective, [](Message* m) { m->sequence = 2; },
           "a collective carries no 'sequence'", "sequence"},
          {MessageType::kRegister, [](Message* m) { m->text = "restore"; },
           "a register carries no 'text'", "text"},
          {MessageType::kShutdown, [](Message* m) { m->step = 1; }, "a shutdown carries no 'step'",
           "step"},
          {MessageType::kHeartbeat, [](Message* m) { m->steps = {1}; },
           "a heartbeat carries no 'steps'", "steps"},
          {MessageType::kRestore,
           [](Message* m) {
             m->tensors = {{"w", Tensor::Filled(Shape{1}, 1)}};
           },
           "a restore carries no 'tensors'", "tensors"},
          {MessageType::kBarrier, [](Message* m) { m->error_code = StatusCode::kInternal; },
           "a barrier carries no 'errorCode'", "errorCode"},
          {MessageType::kPull, [](Message* m) { m->ids = {1}; }, "a pull carries no 'ids'", "ids"},
          {MessageType::kRowPull, [](Message* m) { m->sequence = 1; },
           "a row pull carries no 'sequence'", "sequence"},
          {MessageType::kRowPush, [](Message* m) { m->names = {"w"}; },
           "a row push carries no 'names'", "names"},
      },
      [](MessageType type) {
        Message m = Of(type);
        if (type == MessageType::kRowPull || type == MessageType::kRowPush) {
          m = ExampleOf(type);
        }
        return m;
      });
}

// A record as a head sends it (docs/replication.md, section 2).
Message Record(MessageType type = MessageType::kReplicate) {
  Message m = Of(type);
  if (type != MessageType::kReplicate) return m;
  m.role = "ps";
  m.shard = 1;
  m.map_epoch = 2;
  m.sequence = 11;
  m.step = 10;
  m.tensors = {{"w", Tensor::Filled(Shape{2}, 1)}, {"bn/mean", Tensor::Filled(Shape{1}, 0)}};
  m.assigns = {"bn/mean"};
  m.pushes = {{"worker", 1, 5, 3, 11, 0, ""}};
  m.uses = {{0, 4, 128}};
  m.made_epoch = 2;
  m.record_tags = {{"ps-0", std::string(32, 't')}, {"ps-2", std::string(32, 'u')}};
  m.state_digest = std::string(kStateDigestBytes, 's');
  return m;
}

TEST(CodecFieldsTest, TheReplicationRequestsMayCarryTheirOwnFields) {
  EXPECT_TRUE(ThroughTheWire(Record()).ok()) << ThroughTheWire(Record()).ToString();
  Message copy = Of(MessageType::kReplicaCopy);
  copy.shard = 0;
  copy.sequence = 40;
  copy.tensors = {{"w", Tensor::Filled(Shape{2}, 1)}, {"w/Adam", Tensor::Filled(Shape{2}, 0)}};
  copy.pushes = {{"chief", 0, 7, 12, 40, 0, ""}};
  copy.uses = {{1, 0, 1024}};
  copy.text = "fingerprint";
  EXPECT_TRUE(ThroughTheWire(copy).ok()) << ThroughTheWire(copy).ToString();
  Message set = Of(MessageType::kShardMap);
  set.map_epoch = 3;
  set.chains = {{0, {0, 1}, {}}, {1, {1}, {0}}};
  EXPECT_TRUE(ThroughTheWire(set).ok());
  EXPECT_TRUE(ThroughTheWire(Of(MessageType::kShardMap)).ok()) << "a get carries nothing";
  Message lease = Of(MessageType::kDataLease);
  lease.value = 2;
  EXPECT_TRUE(ThroughTheWire(lease).ok());
  Message push = Of(MessageType::kPush);
  push.sequence = 1;
  push.tensors = {{"w", Tensor::Filled(Shape{2}, 1)}};
  push.uses = {{0, 4, 64}, {0, 5, 64}};
  EXPECT_TRUE(ThroughTheWire(push).ok()) << "a push to shard 0 records its examples' use";
}

TEST(CodecFieldsTest, AReplicateCarryingAPushFieldIsRefused) {
  ExpectEachRefused(
      {
          {MessageType::kReplicate, [](Message* m) { m->root = 1; },
           "a replicate carries no 'root'", "root"},
          {MessageType::kReplicate,
           [](Message* m) {
             m->chains = {{0, {0}, {}}};
           },
           "a replicate carries no 'chains'", "chains"},
          {MessageType::kReplicate, [](Message* m) { m->names = {"w"}; },
           "a replicate carries no 'names'", "names"},
          {MessageType::kPush, [](Message* m) { m->link = "l"; }, "a push carries no 'link'",
           "link"},
          {MessageType::kPush,
           [](Message* m) {
             m->chains = {{0, {0}, {}}};
           },
           "a push carries no 'chains'", "chains"},
          {MessageType::kPush,
           [](Message* m) {
             m->pushes = {{"worker", 1, 5, 3, 0, 0, ""}};
           },
           "a push carries no 'pushes'", "pushes"},
          {MessageType::kReplicaCopy, [](Message* m) { m->step = 3; },
           "a replica copy carries no 'step'", "step"},
          {MessageType::kReplicaCopy,
           [](Message* m) {
             m->record_tags = {{"ps-1", std::string(32, 't')}};
           },
           "a replica copy carries no 'recordTags'", "recordTags"},
          {MessageType::kPush, [](Message* m) { m->made_epoch = 4; },
           "a push carries no 'madeEpoch'", "madeEpoch"},
          {MessageType::kReplicaCopy, [](Message* m) { m->state_digest = std::string(32, 's'); },
           "a replica copy carries no 'stateDigest'", "stateDigest"},
          {MessageType::kShardMap,
           [](Message* m) {
             m->uses = {{0, 1, 2}};
           },
           "a shard map carries no 'uses'", "uses"},
          {MessageType::kDataLease, [](Message* m) { m->sequence = 1; },
           "a data lease carries no 'sequence'", "sequence"},
          {MessageType::kPull,
           [](Message* m) {
             m->uses = {{0, 1, 2}};
           },
           "a pull carries no 'uses'", "uses"},
      },
      Record);
  Message record = Record();
  record.assigns = {"bn/variance"};
  EXPECT_NE(ThroughTheWire(record).message().find(
                "the replicate assigns 'bn/variance' but carries no tensor of that name"),
            std::string::npos);
  record = Record();
  record.state_digest = std::string(31, 's');
  Result<EncodedMessage> encoded = Encode(record);
  ASSERT_TRUE(encoded.ok()) << encoded.status().ToString();
  Result<Message> decoded = Decode(FramesOf(*encoded));
  ASSERT_FALSE(decoded.ok()) << "a state digest of 31 bytes was read";
  EXPECT_NE(
      decoded.status().message().find("carries a state digest of 31 bytes (expected 32, or none)"),
      std::string::npos)
      << decoded.status().ToString();
}

TEST(CodecFieldsTest, APushAssignsOnlyTensorsItCarriesAndRepliesAreNoRequests) {
  Message push = Of(MessageType::kPush);
  push.tensors = {{"w", Tensor::Filled(Shape{2}, 1)}};
  push.assigns = {"conv1/weights"};
  EXPECT_NE(ThroughTheWire(push).message().find(
                "the push assigns 'conv1/weights' but carries no tensor of that name"),
            std::string::npos);
  // Written raw, the decoder refuses it the same way.
  const std::string header = RawHeader([](schema::Header::Builder h) {
    auto p = h.getBody().initWorker().initPush();
    p.initAssigns(1).set(0, "conv1/weights");
    SetMeta(p.initTensors(1)[0], "w", {2}, 8);
  });
  const std::string frame(8, '\0');
  Result<Message> raw =
      Decode({{header.data(), header.size(), nullptr}, {frame.data(), frame.size(), nullptr}});
  EXPECT_NE(raw.status().message().find(
                "the push assigns 'conv1/weights' but carries no tensor of that name"),
            std::string::npos)
      << raw.status().ToString();
  // A server's socket takes requests only: a reply decodes anywhere else.
  Result<EncodedMessage> ok = Encode(Of(MessageType::kOk));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_NE(Decode(FramesOf(*ok), {}, "this server", Expect::kRequest)
                .status()
                .message()
                .find("ok is a reply, not a request"),
            std::string::npos);
  EXPECT_TRUE(Decode(FramesOf(*ok)).ok());
  // An ok carries no status code: only an error's struct is read for one.
  Message coded_ok = Of(MessageType::kOk);
  coded_ok.error_code = StatusCode::kNotFound;
  EXPECT_NE(ThroughTheWire(coded_ok).message().find("an ok carries no 'errorCode'"),
            std::string::npos);
}

}  // namespace
}  // namespace wire
}  // namespace pstrain
