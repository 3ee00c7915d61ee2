// Who a request is from and what its role may ask, as a table: every request type against
// every role, the key's name against the header's claim, and task indices the cluster has.
#include "ps/permissions.h"

#include <gtest/gtest.h>

namespace pstrain {
namespace ps {
namespace {

using wire::Message;
using wire::MessageType;

Message From(const std::string& role, int task, MessageType type) {
  Message m;
  m.type = type;
  m.role = role;
  m.task_index = task;
  return m;
}

TEST(PermissionsTest, EachRoleMayAskWhatTheReadmeTableSays) {
  Message init = From("chief", 0, MessageType::kRegister);
  init.tensors.push_back({"w", Tensor::Filled(Shape{1}, 1)});
  struct Row {
    Message request;
    bool evaluator, worker, chief;
  };
  const std::vector<Row> table = {
      {From("", 0, MessageType::kHeartbeat), true, true, true},
      {From("", 0, MessageType::kRegister), true, true, true},  // are the variables ready?
      {From("", 0, MessageType::kPull), true, true, true},
      {From("", 0, MessageType::kBarrier), true, true, true},
      {From("", 0, MessageType::kPush), false, true, true},
      {init, false, false, true},
      {From("", 0, MessageType::kCheckpoint), false, false, true},
      {From("", 0, MessageType::kRestore), false, false, true},
      {From("", 0, MessageType::kShutdown), false, false, true},
      {From("", 0, MessageType::kStoreSet), false, false, false},  // the hub's, not a server's
      {From("", 0, MessageType::kCollective), false, false, false},
      {From("", 0, MessageType::kOk), false, false, false},
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
  const Message shutdown = From("chief", 0, MessageType::kShutdown);
  EXPECT_TRUE(IdentifySender("worker-0", shutdown).ok());
  EXPECT_TRUE(IdentifySender("", shutdown).ok());  // plaintext: the header is all there is
  for (const char* key : {"worker-1", "evaluator-0", "ps-0", "stranger", "worker-"}) {
    Result<Sender> s = IdentifySender(key, shutdown);
    EXPECT_EQ(s.status().code(), StatusCode::kPermissionDenied) << key;
  }
  EXPECT_EQ(IdentifySender("worker-1", From("chief", 1, MessageType::kPull)).status().code(),
            StatusCode::kPermissionDenied)
      << "only worker 0 is the chief";
  EXPECT_EQ(IdentifySender("", From("", 0, MessageType::kPull)).status().code(),
            StatusCode::kPermissionDenied)
      << "a request must name its sender";
  EXPECT_EQ(IdentifySender("", From("ps", 0, MessageType::kPull)).status().code(),
            StatusCode::kPermissionDenied)
      << "servers do not talk to servers";
}

TEST(PermissionsTest, ATaskTheClusterDoesNotHaveIsRefusedEvenInPlaintext) {
  const ClusterSize cluster{2, 0};
  EXPECT_TRUE(IdentifySender("", From("worker", 1, MessageType::kPull), cluster).ok());
  EXPECT_TRUE(IdentifySender("", From("evaluator", 0, MessageType::kPull), cluster).ok());
  Result<Sender> far = IdentifySender("", From("worker", 7, MessageType::kPull), cluster);
  EXPECT_EQ(far.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(far.status().message().find("the cluster has 2 worker task(s)"), std::string::npos)
      << far.status().message();
  EXPECT_FALSE(IdentifySender("", From("evaluator", 1, MessageType::kPull), cluster).ok());
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
