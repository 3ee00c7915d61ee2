// TF_CONFIG as Kubeflow's TFJob operator writes it, read into a pstrain role: the chief is
// worker 0, TF's workers follow it, and every malformed or contradictory field is named.
#include "common/tf_config.h"

#include <gtest/gtest.h>

namespace pstrain {
namespace {

const char* kCluster = R"("cluster": {"chief": ["c:2222"], "worker": ["w0:2222", "w1:2222"],
                          "ps": ["p0:2222", "p1:2222"], "evaluator": ["e:2222"]})";

Result<TfConfigRole> Parse(const std::string& task) {
  return ParseTfConfig(std::string("{") + kCluster + ", \"task\": " + task +
                       ", \"environment\": \"cloud\"}");
}

TEST(TfConfigTest, TheChiefIsWorkerZeroAndTfsWorkersFollowIt) {
  auto chief = Parse(R"({"type": "chief", "index": 0})");
  ASSERT_TRUE(chief.ok()) << chief.status().ToString();
  EXPECT_EQ(chief->job_name, "worker");
  EXPECT_EQ(chief->task_index, 0);
  EXPECT_EQ(chief->worker_hosts, (std::vector<std::string>{"c:2222", "w0:2222", "w1:2222"}));
  EXPECT_EQ(chief->ps_hosts, (std::vector<std::string>{"p0:2222", "p1:2222"}));
  EXPECT_EQ(chief->evaluators, 1);
  auto worker = Parse(R"({"type": "worker", "index": 1})");
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  EXPECT_EQ(worker->job_name, "worker");
  EXPECT_EQ(worker->task_index, 2);
  auto ps = Parse(R"({"type": "ps", "index": 1})");
  ASSERT_TRUE(ps.ok());
  EXPECT_EQ(ps->job_name, "ps");
  EXPECT_EQ(ps->task_index, 1);
  auto evaluator = Parse(R"({"type": "evaluator", "index": 0})");
  ASSERT_TRUE(evaluator.ok());
  EXPECT_EQ(evaluator->job_name, "evaluator");
}

TEST(TfConfigTest, WithoutAChiefTfsWorkerZeroIsTheChief) {
  auto r = ParseTfConfig(R"({"cluster": {"worker": ["a:1", "b:2"], "ps": ["p:3"]},
                             "task": {"type": "worker", "index": 1}})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->task_index, 1);
  EXPECT_EQ(r->worker_hosts, (std::vector<std::string>{"a:1", "b:2"}));
  EXPECT_EQ(r->evaluators, 0);
}

TEST(TfConfigTest, TfOnesMasterIsTheChief) {
  const std::string cluster = R"({"cluster": {"master": ["m:1"], "worker": ["a:1", "b:2"],
                                               "ps": ["p:3"]}, "task": )";
  auto master = ParseTfConfig(cluster + R"({"type": "master", "index": 0}})");
  ASSERT_TRUE(master.ok()) << master.status().ToString();
  EXPECT_EQ(master->job_name, "worker");
  EXPECT_EQ(master->task_index, 0);
  EXPECT_EQ(master->worker_hosts, (std::vector<std::string>{"m:1", "a:1", "b:2"}));
  auto worker = ParseTfConfig(cluster + R"({"type": "worker", "index": 0}})");
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  EXPECT_EQ(worker->task_index, 1) << "TF's worker 0 follows the master";
}

TEST(TfConfigTest, MalformedOrContradictoryFieldsAreNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "not a JSON object"},
      {R"({"task": {"type": "ps"}})", "cluster is missing"},
      {R"({"cluster": {"ps": ["p:1"], "worker": ["w:1"], "boss": ["m:1"]},
           "task": {"type": "ps"}})",
       "cluster.boss is not a job pstrain knows"},
      {R"({"cluster": {"ps": ["p:1"], "chief": ["c:1"], "master": ["m:1"]},
           "task": {"type": "ps"}})",
       "cluster.chief (with TF-1's cluster.master) has 2 entries; at most one"},
      {R"({"cluster": {"ps": ["p:1"], "worker": ["w"]}, "task": {"type": "ps"}})",
       "cluster.worker[0] 'w' is not host:port"},
      {R"({"cluster": {"ps": "p:1", "worker": ["w:1"]}, "task": {"type": "ps"}})",
       "cluster.ps must be a list"},
      {R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "worker"}})",
       "cluster.ps is missing or empty"},
      {R"({"cluster": {"chief": ["a:1", "b:1"], "ps": ["p:1"]}, "task": {"type": "ps"}})",
       "cluster.chief (with TF-1's cluster.master) has 2 entries; at most one"},
      {R"({"cluster": {"ps": ["p:1"], "worker": ["w:1"]}})", "task is missing"},
      {R"({"cluster": {"ps": ["p:1"], "worker": ["w:1"]}, "task": {"type": "boss"}})",
       "task.type 'boss' is not chief, worker, ps or evaluator"},
      {R"({"cluster": {"ps": ["p:1"], "worker": ["w:1"]}, "task": {"type": "worker",
           "index": 1}})",
       "task.index 1 is out of range for 1 worker task(s) in cluster.worker"},
      {R"({"cluster": {"ps": ["p:1"], "worker": ["w:1"]}, "task": {"type": "ps",
           "index": "0"}})",
       "task.index must be an integer"},
  };
  for (const auto& [json, expected] : cases) {
    auto r = ParseTfConfig(json);
    ASSERT_FALSE(r.ok()) << json;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("TF_CONFIG: " + expected), std::string::npos)
        << "for " << json << ": " << r.status().message();
  }
}

}  // namespace
}  // namespace pstrain
