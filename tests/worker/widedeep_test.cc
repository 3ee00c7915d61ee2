// Wide & Deep in one process, as a user runs it: pstrain-synth-ctr writes a click log from a
// hidden model and the best AUC it allows, pstrain-train trains on it with the embedding tables
// in sparse tables, and the test AUC it reports comes close to that best.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "tests/summary/event_test_util.h"
#include "tests/test_env.h"
#include "worker/network/model.h"
#include "worker/training/click_data.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

using testing::RunCommand;

std::string TempDir(const std::string& name) {
  const std::string dir =
      ::testing::TempDir() + "/widedeep_" + name + "_" + std::to_string(getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The value of "key": in best.json.
double JsonNumber(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\":");
  EXPECT_NE(at, std::string::npos) << key << " in " << json;
  return at == std::string::npos ? NAN : std::stod(json.substr(at + key.size() + 3));
}

// A Wide & Deep model over `n` categorical features C1..Cn and the 13 dense floats.
std::string SmallConfig(int n, const std::string& data, bool hashed = true) {
  std::ostringstream c;
  c << "model:\n  name: widedeep_small\n  inputs:\n    - {name: dense, shape: [13]}\n";
  for (int i = 1; i <= n; ++i) c << "    - {name: C" << i << ", shape: [1]}\n";
  c << "  layers:\n";
  std::string wide, deep;
  for (int i = 1; i <= n; ++i) {
    const std::string f = "C" + std::to_string(i);
    c << "    - {name: wide_" << f << ", type: embedding, inputs: " << f
      << ", dimension: 1, rows: 128}\n";
    c << "    - {name: deep_" << f << ", type: embedding, inputs: " << f
      << ", dimension: 4, rows: 128, combiner: mean}\n";
    wide += (i > 1 ? ", wide_" : "wide_") + f;
    deep += ", deep_" + f;
  }
  c << "    - {name: wide, type: concat, inputs: [" << wide << "]}\n"
    << "    - {name: wide_logits, type: fully_connected, units: 2, inputs: wide}\n"
    << "    - {name: deep, type: concat, inputs: [dense" << deep << "]}\n"
    << "    - {name: deep1, type: fully_connected, units: 16, inputs: deep}\n"
    << "    - {name: deep1_relu, type: relu}\n"
    << "    - {name: deep_logits, type: fully_connected, units: 2}\n"
    << "    - {name: logits, type: add, inputs: [wide_logits, deep_logits]}\n"
    << "    - {name: loss, type: softmax_cross_entropy}\n"
    << "train:\n  batch_size: 128\n  max_steps: 400\n  optimizer: {type: adam}\n"
    << "  learning_rate: {initial: 0.01}\n"
    << "tables:\n  optimizer: {type: adagrad}\n  learning_rate: {initial: 0.1}\n  list:\n";
  for (int i = 1; i <= n; ++i) {
    c << "    - {name: wide_C" << i
      << ", dimension: 1, max_rows: 1000, initializer: {type: zeros}}\n"
      << "    - {name: deep_C" << i << ", dimension: 4, max_rows: 1000}\n";
  }
  c << "input:\n  train_tfrecord: " << data << "/train.tfrecord\n  test_tfrecord: " << data
    << "/test.tfrecord\n  features:\n    - {name: dense, type: float, size: 13}\n";
  for (int i = 1; i <= n; ++i) {
    c << "    - {name: C" << i << ", type: int64" << (hashed ? ", hash_buckets: 1000" : "")
      << "}\n";
  }
  return c.str();
}

// A click log from pstrain-synth-ctr in <dir>/data (`flags`: its sizes) and the small model over
// its first `n` features in <dir>/widedeep.yaml.
::testing::AssertionResult MakeClickRun(const std::string& dir, const std::string& flags, int n,
                                        bool hashed = true) {
  int status = 0;
  const std::string out = RunCommand(
      std::string(PSTRAIN_SYNTH_CTR_BINARY) + " --out_dir=" + dir + "/data " + flags, &status);
  if (status != 0) return ::testing::AssertionFailure() << "pstrain-synth-ctr failed: " << out;
  std::ofstream(dir + "/widedeep.yaml") << SmallConfig(n, dir + "/data", hashed);
  return ::testing::AssertionSuccess();
}

TEST(WideDeepTest, TrainsToWithinThreePointsOfTheBestAucOfItsSyntheticLog) {
  const std::string dir = TempDir("small");
  int status = 0;
  const std::string synth = RunCommand(std::string(PSTRAIN_SYNTH_CTR_BINARY) + " --out_dir=" + dir +
                                           "/data --categorical=4 --vocabulary=50 --seed=3"
                                           " --train_examples=20000 --test_examples=5000",
                                       &status);
  ASSERT_EQ(status, 0) << synth;
  std::ifstream best_file(dir + "/data/best.json");
  const std::string best((std::istreambuf_iterator<char>(best_file)), {});
  const double best_auc = JsonNumber(best, "auc");
  const double rate = JsonNumber(best, "positive_rate");
  std::ofstream(dir + "/widedeep.yaml") << SmallConfig(4, dir + "/data");
  const std::string out = RunCommand(std::string(PSTRAIN_TRAIN_BINARY) + " --config=" + dir +
                                         "/widedeep.yaml --train_dir=" + dir +
                                         "/run --logdir=" + dir + "/logs --log_every_n_steps=100",
                                     &status);
  ASSERT_EQ(status, 0) << out;
  // The trainer's own progress lines, with the tables' rows, and its TensorBoard runs.
  EXPECT_NE(out.find("step 400/400 (epoch"), std::string::npos) << out;
  EXPECT_NE(out.find("examples/s, tables: "), std::string::npos) << out;
  std::vector<float> eval_auc;
  for (const std::string& file : EventFiles(dir + "/logs/eval")) {
    auto events = ReadEvents(file);
    ASSERT_TRUE(events.ok()) << events.status().ToString();
    for (const auto& e : *events) {
      for (const auto& v : e.summary().value())
        if (v.tag() == "auc") eval_auc.push_back(v.simple_value());
    }
  }
  ASSERT_FALSE(eval_auc.empty()) << "no auc scalar in " << dir << "/logs/eval";
  // The tables leave the process in its ONNX export (tests/onnx/click_model_export_test.cc runs
  // one in onnxruntime): 4 features x (1 + 4) floats over 1 + 1000 buckets, and the dense part.
  ASSERT_TRUE(fs::exists(dir + "/run/model.onnx")) << out;
  EXPECT_GT(fs::file_size(dir + "/run/model.onnx"), 4u * 5 * 1001 * sizeof(float)) << out;
  double auc = 0, log_loss = 0;
  const size_t at = out.rfind("test AUC");
  ASSERT_NE(at, std::string::npos) << out;
  ASSERT_EQ(std::sscanf(out.c_str() + at, "test AUC %lf, test log loss %lf", &auc, &log_loss), 2);
  std::printf("test AUC %.4f (best %.4f), log loss %.4f\n", auc, best_auc, log_loss);
  EXPECT_GE(auc, best_auc - 0.03) << out;
  EXPECT_LE(auc, best_auc + 0.02);  // more than the hidden model's own ranking is luck
  // A model that knows only the click rate: AUC 0.5, log loss the rate's entropy.
  const double trivial_loss = -(rate * std::log(rate) + (1 - rate) * std::log(1 - rate));
  EXPECT_GT(auc, 0.7);
  EXPECT_LT(log_loss, trivial_loss - 0.08) << "trivial " << trivial_loss;
  EXPECT_NEAR(eval_auc.back(), auc, 1e-3);  // the last evaluation is the one reported
}

TEST(WideDeepTest, TheShippedConfigTrainsOnALogOfCriteosShape) {
  const std::string dir = TempDir("shipped");
  int status = 0;
  const std::string synth = RunCommand(std::string(PSTRAIN_SYNTH_CTR_BINARY) + " --out_dir=" + dir +
                                           "/data/ctr --train_examples=3000 --test_examples=500",
                                       &status);
  ASSERT_EQ(status, 0) << synth;
  const std::string out =
      RunCommand(std::string(PSTRAIN_TRAIN_BINARY) + " --config=" + testing::SourceDir() +
                     "/configs/widedeep.yaml --data_dir=" + dir + " --train_dir=" + dir +
                     "/run --max_steps=20",
                 &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("done: global step 20"), std::string::npos) << out;
  EXPECT_NE(out.find("test AUC"), std::string::npos) << out;
  // Its tables are CPU code: asked for the GPU, it stops at start saying so, before any data.
  const std::string gpu =
      RunCommand(std::string(PSTRAIN_TRAIN_BINARY) + " --config=" + testing::SourceDir() +
                     "/configs/widedeep.yaml --data_dir=" + dir + " --train_dir=" + dir +
                     "/gpu --max_steps=20 --device=gpu",
                 &status);
  EXPECT_NE(status, 0) << gpu;
  EXPECT_NE(gpu.find("--device=gpu: a model with sparse tables"), std::string::npos) << gpu;
  EXPECT_EQ(gpu.find("done:"), std::string::npos) << gpu;
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

// Ctrl-C or the launcher's SIGTERM in the middle of a click model's run: it stops at the end of
// the step and says "done" at that step, as an image model's run does.
TEST(WideDeepTest, SigtermStopsTheRunAtAStepBoundaryAndItSaysDoneAtThatStep) {
  const std::string dir = TempDir("stop");
  int status = 0;
  ASSERT_TRUE(MakeClickRun(dir, "--categorical=2 --train_examples=2000 --test_examples=200", 2));
  const std::string log = dir + "/train.log";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    const std::string config = "--config=" + dir + "/widedeep.yaml";
    const std::string train_dir = "--train_dir=" + dir + "/run";
    execl(PSTRAIN_TRAIN_BINARY, PSTRAIN_TRAIN_BINARY, config.c_str(), train_dir.c_str(),
          "--max_steps=100000000", "--log_every_n_steps=20", "--eval_every_n_steps=100000000",
          nullptr);
    _exit(127);
  }
  // Signalled once it is training (its first progress line), not while it starts.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (ReadAll(log).find("trainer: step 20/") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline && waitpid(pid, &status, WNOHANG) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(kill(pid, SIGTERM), 0) << ReadAll(log);
  const auto stop_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool exited = false;
  while (!(exited = waitpid(pid, &status, WNOHANG) == pid) &&
         std::chrono::steady_clock::now() < stop_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  const std::string out = ReadAll(log);
  ASSERT_TRUE(exited) << "still training 60 s after SIGTERM:\n" << out;
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  const size_t stopped = out.find("trainer: stop requested at step ");
  ASSERT_NE(stopped, std::string::npos) << out;
  const long step = std::stol(out.substr(stopped + 32));
  EXPECT_GE(step, 20);
  EXPECT_LT(step, 100000000);
  EXPECT_NE(out.find("done: global step " + std::to_string(step) + ","), std::string::npos) << out;
}

// Ids kept as they are (no hash_buckets) have no bound, so the tables have no whole form: the
// run says so at its start, trains, and ends "done" without a model.onnx.
TEST(WideDeepTest, WithoutHashBucketsTheRunSaysAtStartThatItWritesNoOnnxAndEndsDone) {
  const std::string dir = TempDir("unhashed");
  int status = 0;
  ASSERT_TRUE(MakeClickRun(dir, "--categorical=2 --vocabulary=50 --train_examples=500 --test_examples=50", 2, /*hashed=*/false));
  const std::string out = RunCommand(std::string(PSTRAIN_TRAIN_BINARY) + " --config=" + dir +
                                         "/widedeep.yaml --train_dir=" + dir + "/run --max_steps=5",
                                     &status);
  ASSERT_EQ(status, 0) << out;
  const size_t said = out.find("no model.onnx will be written at the end: feature 'C1'");
  ASSERT_NE(said, std::string::npos) << out;
  EXPECT_LT(said, out.find("trainer: training ")) << "said before training starts";
  EXPECT_NE(out.find("done: global step 5"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir + "/run/model.onnx"));
  EXPECT_TRUE(fs::exists(dir + "/run/model.safetensors"));
}

// The tables are in the run's checkpoints: a second run on the same train_dir resumes at the
// last step with every row and optimizer slot, so evaluating it without a step more gives the
// first run's final figures to the last digit. Without the rows it would score its dense part
// over empty tables.
TEST(WideDeepTest, ARunResumesWithItsTablesFromItsCheckpoint) {
  const std::string dir = TempDir("resume");
  int status = 0;
  ASSERT_TRUE(MakeClickRun(dir, "--categorical=3 --vocabulary=50 --train_examples=4000 --test_examples=1000", 3));
  const std::string train = std::string(PSTRAIN_TRAIN_BINARY) + " --config=" + dir +
                            "/widedeep.yaml --train_dir=" + dir + "/run --max_steps=150";
  const std::string first = RunCommand(train, &status);
  ASSERT_EQ(status, 0) << first;
  const std::string second = RunCommand(train, &status);
  ASSERT_EQ(status, 0) << second;
  EXPECT_NE(second.find("restored "), std::string::npos) << second;
  EXPECT_NE(second.find("at global step 150"), std::string::npos) << second;
  const auto auc_line = [](const std::string& out) {
    const size_t at = out.rfind("test AUC");
    return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
  };
  ASSERT_FALSE(auc_line(first).empty()) << first;
  EXPECT_EQ(auc_line(second), auc_line(first)) << second;
  EXPECT_NE(second.find("done: global step 150,"), std::string::npos) << second;
}

TEST(WideDeepTest, ATableReachingMaxTableRowsStopsTheRunNamingIt) {
  const std::string dir = TempDir("full");
  int status = 0;
  ASSERT_TRUE(MakeClickRun(dir, "--categorical=2 --vocabulary=500 --train_examples=500 --test_examples=10", 2));
  const std::string out =
      RunCommand(std::string(PSTRAIN_TRAIN_BINARY) + " --config=" + dir +
                     "/widedeep.yaml --train_dir=" + dir + "/run --max_table_rows=60",
                 &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("is full"), std::string::npos) << out;
  EXPECT_NE(out.find("over max_rows 60"), std::string::npos) << out;
}

TEST(WideDeepTest, AFeatureTheLogLacksStopsTheRunNamingItAndTheRecord) {
  const std::string dir = TempDir("missing");
  int status = 0;
  ASSERT_TRUE(MakeClickRun(dir, "--categorical=2 --train_examples=50 --test_examples=10", 3));
  const std::string out = RunCommand(std::string(PSTRAIN_TRAIN_BINARY) + " --config=" + dir +
                                         "/widedeep.yaml --train_dir=" + dir + "/run",
                                     &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("record 0: feature 'C3' is missing"), std::string::npos) << out;
  EXPECT_NE(out.find("train.tfrecord"), std::string::npos) << out;
}

// A distributed worker reads shard k of n of the click log (worker/training/click_data.h): the
// shards hold every training example exactly once, and an evaluator (shard count 0) reads the
// test file alone.
TEST(WideDeepTest, ShardsOfTheClickLogHoldEveryExampleOnceAndAnEvaluatorReadsOnlyTheTestFile) {
  const std::string dir = TempDir("shards");
  ASSERT_TRUE(MakeClickRun(dir, "--categorical=2 --train_examples=1000 --test_examples=100", 2));
  auto config = ConfigNode::LoadFile(dir + "/widedeep.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto model = worker::Model::FromConfig(config->Child("model").value());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  (*model)->InitVariables(1);
  std::map<std::vector<float>, int> seen;  // an example's dense features, how often read
  for (int k = 0; k < 3; ++k) {
    auto data = worker::ClickData::Read(*config, **model, "", worker::ClickShard{k, 3}, 7);
    ASSERT_TRUE(data.ok()) << data.status().ToString();
    EXPECT_EQ(data->train_examples(), 1000) << "steps per epoch count the whole log";
    const worker::FeatureBatch batch = data->Next(100000);  // the whole shard, shuffled
    EXPECT_EQ(batch.labels.size(), k == 0 ? 334u : 333u) << "shard " << k;
    const Tensor& dense = batch.inputs[0];
    for (int64_t e = 0; e < dense.dim(0); ++e) {
      ++seen[std::vector<float>(dense.data() + e * 13, dense.data() + (e + 1) * 13)];
    }
  }
  EXPECT_EQ(seen.size(), 1000u) << "some examples were read by no shard, or by two";
  for (const auto& [features, times] : seen) ASSERT_EQ(times, 1);
  auto evaluator = worker::ClickData::Read(*config, **model, "", worker::ClickShard{0, 0}, 7);
  ASSERT_TRUE(evaluator.ok()) << evaluator.status().ToString();
  int gathered = 0;
  auto e = evaluator->Evaluate(model->get(), 64, [&](const worker::FeatureBatch&) {
    ++gathered;
    return Status::OK();
  });
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->examples, 100);
  EXPECT_EQ(gathered, 2) << "100 test examples in batches of 64";
  EXPECT_FALSE(worker::ClickData::Read(*config, **model, "", worker::ClickShard{3, 3}, 7).ok());
}

}  // namespace
}  // namespace pstrain
