// Which refusal makes the chief initialise a server again: only Uninitialized ("this server holds
// no variables"), never another code such as FailedPrecondition, whatever its text says. Against
// a fake server over real sockets and the real wire encoding (tests/distributed/fake_server.h).
#include <gtest/gtest.h>

#include <atomic>
#include <optional>

#include "tests/distributed/fake_server.h"
#include "tests/distributed/sgd_variables.h"
#include "worker/distributed/ps_client.h"

namespace pstrain {
namespace {

using testing::ConnectTo;
using testing::FakeServer;
using testing::Ok;
using wire::Message;
using wire::MessageType;

// A pull's reply holding every variable of sgd.yaml's model at `value`.
Message PullReply(const Message& pull, float value) {
  Message r = Ok(pull, 0, 9);
  r.task_index = 0;
  r.tensors.push_back({"fc/bias", Tensor::Filled(Shape{2}, value)});
  r.tensors.push_back({"fc/weights", Tensor::Filled(Shape{4, 2}, value)});
  return r;
}

TEST(PsClientRefusalTest, UninitializedMakesTheChiefInitialiseTheServerAndResendItsRequest) {
  std::atomic<bool> initialised{false};
  FakeServer server([&](const Message& m) -> std::optional<Message> {
    if (m.type == MessageType::kRegister) {
      if (!m.tensors.empty()) initialised = true;
      return Ok(m, 0);
    }
    if (m.type == MessageType::kPull && !initialised) {
      return wire::ErrorReply(m, Uninitialized("ps 0: variables are not initialised yet"));
    }
    return m.type == MessageType::kPull ? PullReply(m, 3.0f) : Ok(m, 0);
  });
  testing::SgdVariables vars;
  auto chief = ConnectTo({&server}, &vars, 0, "chief");
  ASSERT_NE(chief, nullptr);
  Result<int64_t> step = chief->Pull();
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_EQ(*step, 9);
  EXPECT_EQ(vars.weights.value.ToVector(), std::vector<float>(8, 3.0f));
  const std::vector<Message> registers = server.Received({MessageType::kRegister});
  ASSERT_EQ(registers.size(), 1u) << "one re-initialisation";
  // The chief's own values, which the server lost.
  ASSERT_EQ(registers[0].tensors.size(), 2u);
  int pulls = 0;
  for (const Message& m : server.Received()) pulls += m.type == MessageType::kPull;
  EXPECT_EQ(pulls, 2) << "the pull is sent again once the server holds its variables";
}

TEST(PsClientRefusalTest, AFailedPreconditionFailsTheChiefsRequestAndInitialisesNothing) {
  // Text that once would have read as a server without variables: only the code counts now.
  const Status refusal =
      FailedPrecondition("ps 0: variables are not initialised yet (a stale server)");
  FakeServer server([&](const Message& m) -> std::optional<Message> {
    if (m.type == MessageType::kPull) return wire::ErrorReply(m, refusal);
    return Ok(m, 0);
  });
  testing::SgdVariables vars;
  auto chief = ConnectTo({&server}, &vars, 0, "chief");
  ASSERT_NE(chief, nullptr);
  Result<int64_t> step = chief->Pull();
  ASSERT_FALSE(step.ok());
  EXPECT_EQ(step.status().code(), StatusCode::kFailedPrecondition) << step.status().ToString();
  EXPECT_NE(step.status().message().find("a stale server"), std::string::npos)
      << step.status().message();
  EXPECT_TRUE(server.Received({MessageType::kRegister}).empty())
      << "a FailedPrecondition re-initialised the server";
  EXPECT_EQ(vars.weights.value.ToVector(), std::vector<float>(8, 1.0f)) << "nothing copied";
}

}  // namespace
}  // namespace pstrain
