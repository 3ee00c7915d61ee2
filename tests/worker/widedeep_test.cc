// Wide & Deep in one process, as a user runs it: pstrain-synth-ctr writes a click log from a
// hidden model and the best AUC it allows, pstrain-train trains on it with the embedding tables
// in sparse tables, and the test AUC it reports comes close to that best.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/test_env.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

std::string RunCommand(const std::string& cmd, int* status) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  *status = pclose(p);
  return out;
}

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
std::string SmallConfig(int n, const std::string& data) {
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
  for (int i = 1; i <= n; ++i) c << "    - {name: C" << i << ", type: int64, hash_buckets: 1000}\n";
  return c.str();
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
                                         "/widedeep.yaml --train_dir=" + dir + "/run",
                                     &status);
  ASSERT_EQ(status, 0) << out;
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
}

TEST(WideDeepTest, ATableReachingMaxTableRowsStopsTheRunNamingIt) {
  const std::string dir = TempDir("full");
  int status = 0;
  RunCommand(std::string(PSTRAIN_SYNTH_CTR_BINARY) + " --out_dir=" + dir +
                 "/data --categorical=2 --vocabulary=500 --train_examples=500 --test_examples=10",
             &status);
  ASSERT_EQ(status, 0);
  std::ofstream(dir + "/widedeep.yaml") << SmallConfig(2, dir + "/data");
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
  RunCommand(std::string(PSTRAIN_SYNTH_CTR_BINARY) + " --out_dir=" + dir +
                 "/data --categorical=2 --train_examples=50 --test_examples=10",
             &status);
  ASSERT_EQ(status, 0);
  std::ofstream(dir + "/widedeep.yaml") << SmallConfig(3, dir + "/data");
  const std::string out = RunCommand(std::string(PSTRAIN_TRAIN_BINARY) + " --config=" + dir +
                                         "/widedeep.yaml --train_dir=" + dir + "/run",
                                     &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("record 0: feature 'C3' is missing"), std::string::npos) << out;
  EXPECT_NE(out.find("train.tfrecord"), std::string::npos) << out;
}

}  // namespace
}  // namespace pstrain
