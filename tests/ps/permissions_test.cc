// Who a request is from and what its role may ask, as a table: every request type against
// every role, the key's name against the header's claim, and task indices the cluster has.
#include "ps/permissions.h"

#include <gtest/gtest.h>

#include "common/wire/request.h"

namespace pstrain {
namespace ps {
namespace {

using wire::Message;
using wire::MessageType;

using wire::Request;

TEST(PermissionsTest, EachRoleMayAskWhatTheReadmeTableSays) {
  Message init = Request(MessageType::kRegister, "chief", 0);
  init.tensors.push_back({"w", Tensor::Filled(Shape{1}, 1)});
  struct Row {
    Message request;
    bool evaluator, worker, chief;
  };
  const std::vector<Row> table = {
      {Request(MessageType::kHeartbeat, "", 0), true, true, true},
      {Request(MessageType::kRegister, "", 0), true, true, true},  // are the variables ready?
      {Request(MessageType::kPull, "", 0), true, true, true},
      {Request(MessageType::kBarrier, "", 0), true, true, true},
      {Request(MessageType::kPush, "", 0), false, true, true},
      {init, false, false, true},
      {Request(MessageType::kCheckpoint, "", 0), false, false, true},
      {Request(MessageType::kRestore, "", 0), false, false, true},
      {Request(MessageType::kShutdown, "", 0), false, false, true},
      {Request(MessageType::kStoreSet, "", 0), false, false, false},  // the hub's, not a server's
      {Request(MessageType::kCollective, "", 0), false, false, false},
      {Request(MessageType::kOk, "", 0), false, false, false},
      {Request(MessageType::kReplicate, "", 0), false, false, false},  // a server's, to a server
      {Request(MessageType::kReplicaCopy, "", 0), false, false, false},
      {Request(MessageType::kShardMap, "", 0), true, true, true},  // a get
      {Request(MessageType::kDataLease, "", 0), false, true, true},
      {Request(MessageType::kRowPull, "", 0), true, true, true},  // an evaluator reads rows
      {Request(MessageType::kRowPush, "", 0), false, true, true},
  };
  for (const Row& row : table) {
    const char* type = wire::MessageTypeName(row.request.type);
    EXPECT_EQ(Authorize({"evaluator", 0}, row.request).ok(), row.evaluator) << type;
    EXPECT_EQ(Authorize({"worker", 1}, row.request).ok(), row.worker) << type;
    EXPECT_EQ(Authorize({"chief", 0}, row.request).ok(), row.chief) << type;
    if (!row.chief) {
      EXPECT_EQ(Authorize({"chief", 0}, row.request).code(), StatusCode::kPermissionDenied);
    }
  }
}

TEST(PermissionsTest, TheKeyDecidesWhoSentItAndTheHeaderMustAgree) {
  const Message shutdown = Request(MessageType::kShutdown, "chief", 0);
  EXPECT_TRUE(IdentifySender("worker-0", shutdown).ok());
  EXPECT_TRUE(IdentifySender("", shutdown).ok());  // plaintext: the header is all there is
  for (const char* key : {"worker-1", "evaluator-0", "ps-0", "stranger", "worker-"}) {
    Result<Sender> s = IdentifySender(key, shutdown);
    EXPECT_EQ(s.status().code(), StatusCode::kPermissionDenied) << key;
  }
  EXPECT_EQ(IdentifySender("worker-1", Request(MessageType::kPull, "chief", 1)).status().code(),
            StatusCode::kPermissionDenied)
      << "only worker 0 is the chief";
  EXPECT_EQ(IdentifySender("", Request(MessageType::kPull, "", 0)).status().code(),
            StatusCode::kPermissionDenied)
      << "a request must name its sender";
  EXPECT_EQ(IdentifySender("ps-1", Request(MessageType::kReplicate, "ps", 0)).status().code(),
            StatusCode::kPermissionDenied)
      << "ps 1's key claiming ps 0";
  EXPECT_EQ(IdentifySender("ps-0", Request(MessageType::kPull, "worker", 0)).status().code(),
            StatusCode::kPermissionDenied)
      << "a server's key claiming a worker";
}

// A shard map request from `role` `task` that sets the map (it carries chains).
Message WithChains(const std::string& role, int task) {
  Message m = Request(MessageType::kShardMap, role, task);
  m.chains = {{0, {0, 1}, {}}, {1, {1, 0}, {}}};
  return m;
}

TEST(PermissionsTest, AServerKeyMayOnlyReplicate) {
  for (MessageType type : {MessageType::kReplicate, MessageType::kReplicaCopy}) {
    const Message m = Request(type, "ps", 1);
    Result<Sender> s = IdentifySender("ps-1", m, ClusterSize{2, 0, 2});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_TRUE(s->authenticated);
    EXPECT_TRUE(Authorize(*s, m).ok()) << wire::MessageTypeName(type);
  }
  Message init = Request(MessageType::kRegister, "ps", 1);
  init.tensors.push_back({"w", Tensor::Filled(Shape{1}, 1)});
  std::vector<Message> others = {init, WithChains("ps", 1)};
  for (MessageType type : {MessageType::kRegister, MessageType::kPull, MessageType::kPush,
                           MessageType::kBarrier, MessageType::kHeartbeat, MessageType::kCheckpoint,
                           MessageType::kShutdown, MessageType::kRestore, MessageType::kShardMap,
                           MessageType::kDataLease, MessageType::kRowPull, MessageType::kRowPush}) {
    others.push_back(Request(type, "ps", 1));
  }
  for (const Message& m : others) {
    const Status s = Authorize({"ps", 1, true}, m);
    EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << wire::MessageTypeName(m.type);
    EXPECT_NE(s.message().find("ps 1 may not send"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("a parameter server may only send replicate and replica copy"),
              std::string::npos)
        << s.message();
  }
  Result<Sender> far = IdentifySender("", Request(MessageType::kReplicate, "ps", 2), {2, 0, 2});
  EXPECT_EQ(far.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(far.status().message().find("the cluster has 2 ps task(s)"), std::string::npos)
      << far.status().message();
}

TEST(PermissionsTest, AWorkerMayNotReplicateOrSetTheMap) {
  const Sender senders[] = {{"worker", 1, true}, {"evaluator", 0, true}};
  for (const Sender& sender : senders) {
    for (MessageType type : {MessageType::kReplicate, MessageType::kReplicaCopy}) {
      const Status s = Authorize(sender, Request(type, sender.role, sender.task));
      EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << sender.Name();
      EXPECT_NE(s.message().find(sender.Name() + " may not send " + wire::MessageTypeName(type) +
                                 " (only a parameter server may"),
                std::string::npos)
          << s.message();
    }
    const Status set = Authorize(sender, WithChains(sender.role, sender.task));
    EXPECT_EQ(set.code(), StatusCode::kPermissionDenied) << sender.Name();
    EXPECT_NE(set.message().find("may not send shard map with chains (setting the map)"),
              std::string::npos)
        << set.message();
  }
  // Not even the chief replicates: a record comes from the shard's previous server only.
  EXPECT_EQ(Authorize({"chief", 0}, Request(MessageType::kReplicate, "chief", 0)).code(),
            StatusCode::kPermissionDenied);
  // A worker's key claiming a server is refused before any of that.
  EXPECT_EQ(IdentifySender("worker-1", Request(MessageType::kReplicate, "ps", 1)).status().code(),
            StatusCode::kPermissionDenied);
}

TEST(PermissionsTest, AnyoneMayGetTheMapButOnlyTheChiefSetsIt) {
  const Message get = Request(MessageType::kShardMap, "", 0);
  for (const Sender& sender : {Sender{"evaluator", 0}, Sender{"worker", 1}, Sender{"chief", 0}}) {
    EXPECT_TRUE(Authorize(sender, get).ok()) << sender.Name();
  }
  EXPECT_TRUE(Authorize({"chief", 0}, WithChains("chief", 0)).ok());
  EXPECT_FALSE(Authorize({"worker", 1}, WithChains("worker", 1)).ok());
  EXPECT_FALSE(Authorize({"evaluator", 0}, WithChains("evaluator", 0)).ok());
  EXPECT_FALSE(Authorize({"ps", 0}, WithChains("ps", 0)).ok()) << "servers take the map, never "
                                                                  "set it on one another";
}

TEST(PermissionsTest, ATaskTheClusterDoesNotHaveIsRefusedEvenInPlaintext) {
  const ClusterSize cluster{2, 0};
  EXPECT_TRUE(IdentifySender("", Request(MessageType::kPull, "worker", 1), cluster).ok());
  EXPECT_TRUE(IdentifySender("", Request(MessageType::kPull, "evaluator", 0), cluster).ok());
  Result<Sender> far = IdentifySender("", Request(MessageType::kPull, "worker", 7), cluster);
  EXPECT_EQ(far.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(far.status().message().find("the cluster has 2 worker task(s)"), std::string::npos)
      << far.status().message();
  EXPECT_FALSE(IdentifySender("", Request(MessageType::kPull, "evaluator", 1), cluster).ok());
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
