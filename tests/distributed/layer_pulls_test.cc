// PsClient's per-layer pulls (--pull_schedule, worker/distributed/pull_schedule.h) against an
// in-process fake server: which pulls leave when, that a layer's wait copies its own values and
// not the others', that the push goes in parts that end with their layers and nothing is pulled
// after them, and that a reply of the wrong shape fails the layer's wait naming it and changes
// nothing.
#include <gtest/gtest.h>

#include <atomic>

#include "tests/distributed/fake_server.h"
#include "tests/distributed/sgd_variables.h"
#include "worker/distributed/ps_client.h"

namespace pstrain {
namespace {

using testing::FakeServer;
using testing::Ok;
using wire::Message;
using wire::MessageType;

// Layer 0 holds fc/weights, layer 1 nothing, layer 2 fc/bias.
const std::vector<worker::LayerVariables> kLayers = {
    {"w", {"fc/weights"}}, {"relu", {}}, {"b", {"fc/bias"}}};

// Answers a pull with every name asked (weights 9, bias 7; weights of `weights_shape`), anything
// else with OK at global step 5.
FakeServer::Handler Answer(const std::atomic<bool>* wrong_shape) {
  return [wrong_shape](const Message& m) -> std::optional<Message> {
    Message r = Ok(m, 0, 5);
    if (m.type != MessageType::kPull) return r;
    for (const std::string& name : m.names) {
      if (name == "fc/weights") {
        r.tensors.push_back({name, Tensor::Filled(*wrong_shape ? Shape{2, 2} : Shape{4, 2}, 9)});
      } else {
        r.tensors.push_back({name, Tensor::Filled(Shape{2}, 7.0f)});
      }
    }
    return r;
  };
}

std::unique_ptr<worker::PsClient> Connect(FakeServer* server, testing::SgdVariables* vars,
                                          worker::PullSchedule schedule) {
  std::unique_ptr<worker::PsClient> c = testing::ConnectTo({server}, vars);
  if (!c) return nullptr;
  c->set_push_part_bytes(1 << 20);
  EXPECT_TRUE(c->set_pull_schedule(schedule, kLayers).ok());
  return c;
}

TEST(LayerPullsTest, LateSendsEachLayersPullAtItsWaitAndNothingAfterTheParts) {
  std::atomic<bool> wrong{false};
  FakeServer server(Answer(&wrong));
  testing::SgdVariables vars;
  auto client = Connect(&server, &vars, worker::PullSchedule::kLate);
  ASSERT_NE(client, nullptr);
  ASSERT_EQ(client->pull_schedule(), worker::PullSchedule::kLate);
  client->BeginStep(3);
  ASSERT_TRUE(client->AwaitLayer(0).ok());
  EXPECT_EQ(vars.weights.value.ToVector(), std::vector<float>(8, 9.0f));
  EXPECT_EQ(vars.bias.value.ToVector(), std::vector<float>(2, 0.5f)) << "not its layer's turn";
  ASSERT_TRUE(client->AwaitLayer(1).ok());  // no variables: nothing to wait for
  ASSERT_TRUE(client->AwaitLayer(2).ok());
  EXPECT_EQ(vars.bias.value.ToVector(), std::vector<float>(2, 7.0f));
  vars.SetGradients(0.25f);
  ASSERT_TRUE(client->Ready(&vars.bias).ok());
  ASSERT_TRUE(client->Ready(&vars.weights).ok());
  auto result = client->FinishStep();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->global_step, 5) << "the step the closing part's reply carries";
  // The pulls, then one part per layer (a part ends where a layer does), backward's order.
  const std::vector<Message> sent = server.Received({MessageType::kPull, MessageType::kPush});
  ASSERT_EQ(sent.size(), 4u);
  EXPECT_EQ(sent[0].type, MessageType::kPull);
  EXPECT_EQ(sent[0].names, std::vector<std::string>{"fc/weights"});
  EXPECT_EQ(sent[1].type, MessageType::kPull);
  EXPECT_EQ(sent[1].names, std::vector<std::string>{"fc/bias"});
  for (int i : {2, 3}) {
    EXPECT_EQ(sent[i].type, MessageType::kPush);
    EXPECT_EQ(sent[i].step, 3);
    ASSERT_EQ(sent[i].tensors.size(), 1u);
  }
  EXPECT_EQ(sent[2].tensors[0].name, "fc/bias");
  EXPECT_EQ(sent[2].value, 1);
  EXPECT_EQ(sent[3].tensors[0].name, "fc/weights");
  EXPECT_EQ(sent[3].value, 0) << "the last part closes the step";
}

TEST(LayerPullsTest, PerLayerSendsEveryPullAtTheStartAndAWrongShapeChangesNothing) {
  std::atomic<bool> wrong{true};
  FakeServer server(Answer(&wrong));
  testing::SgdVariables vars;
  auto client = Connect(&server, &vars, worker::PullSchedule::kPerLayer);
  ASSERT_NE(client, nullptr);
  client->BeginStep(0);
  Status waited = client->AwaitLayer(0);
  ASSERT_FALSE(waited.ok());
  EXPECT_NE(waited.message().find("answered the pull of 'fc/weights' [4,2] with 'fc/weights' "
                                  "[2,2]"),
            std::string::npos)
      << waited.ToString();
  EXPECT_EQ(vars.weights.value.ToVector(), std::vector<float>(8, 1.0f)) << "nothing copied";
  // Both pulls left at the step's start, input side first, before any wait (the second may
  // still be on its way when the first's reply came back).
  const std::vector<Message> sent =
      server.ReceivedAtLeast({MessageType::kPull, MessageType::kPush}, 2);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].names, std::vector<std::string>{"fc/weights"});
  EXPECT_EQ(sent[1].names, std::vector<std::string>{"fc/bias"});
  // The step's failure stays its failure.
  EXPECT_FALSE(client->AwaitLayer(2).ok());
  EXPECT_FALSE(client->FinishStep().ok());
}

}  // namespace
}  // namespace pstrain
