// The trainer as a user runs it: the pstrain-train binary in a child process, killed with
// SIGKILL, restarted, pointed at corrupt checkpoints and bad configs.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/checkpoint_manager.h"
#include "tests/test_env.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

bool HaveData() {
  return fs::exists("/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz");
}

std::string TinyConfig() { return testing::SourceDir() + "/tests/worker/testdata/tiny.yaml"; }

std::string FreshDir(const std::string& name) {
  std::string d = ::testing::TempDir() + "/trainer_test_" + name + "_" + std::to_string(getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Runs the trainer to completion; returns its exit code and puts stdout+stderr in *output.
int RunTrainer(const std::string& args, std::string* output) {
  std::string cmd = std::string(PSTRAIN_TRAIN_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  output->clear();
  while (size_t n = fread(buf, 1, sizeof(buf), p)) output->append(buf, n);
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string Common(const std::string& dir) {
  return "--config=" + TinyConfig() + " --train_dir=" + dir +
         " --log_every_n_steps=10 --eval_every_n_steps=100000 --save_checkpoints_secs=0";
}

// Tensors of a safetensors file (F32 only), read by hand from the published layout.
std::map<std::string, std::vector<float>> ReadSafetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  std::string header(header_len, '\0');
  in.read(header.data(), header_len);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<std::string, std::vector<float>> out;
  const nlohmann::json parsed = nlohmann::json::parse(header);
  for (auto it = parsed.begin(); it != parsed.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& info = it.value();
    if (name == "__metadata__") continue;
    size_t begin = info["data_offsets"][0], end = info["data_offsets"][1];
    std::vector<float> v((end - begin) / 4);
    std::memcpy(v.data(), data.data() + begin, end - begin);
    out[name] = v;
  }
  return out;
}

TEST(TrainerTest, KilledRunResumesFromTheLatestCheckpointWithTheSameStepAndVariables) {
  if (!HaveData()) GTEST_SKIP() << "Fashion-MNIST is not installed (dataset-fashion-mnist)";
  const std::string dir = FreshDir("kill");
  // The trainer itself is the child (no shell in between), so SIGKILL reaches it.
  const std::string log = dir + "/first.log";
  std::vector<std::string> args{PSTRAIN_TRAIN_BINARY,          "--config=" + TinyConfig(),
                                "--train_dir=" + dir,          "--max_steps=100000",
                                "--save_checkpoints_steps=25", "--save_checkpoints_secs=0",
                                "--eval_every_n_steps=100000"};
  pid_t pid = fork();
  if (pid == 0) {
    FILE* f = std::fopen(log.c_str(), "w");
    dup2(fileno(f), 1);
    dup2(fileno(f), 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  CheckpointManager manager(dir, 5);
  int64_t latest_step = 0;
  for (int i = 0; i < 600 && latest_step < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto latest = manager.LatestPath();
    if (latest.ok()) latest_step = std::stoll(latest->substr(latest->rfind('-') + 1));
  }
  ASSERT_GE(latest_step, 100) << "no checkpoint at step >= 100 within 60 s";
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the trainer ended by itself";

  // Every checkpoint left behind verifies.
  auto all = manager.AllPaths();
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_FALSE(all->empty());
  for (const auto& path : all.value()) {
    EXPECT_TRUE(ReadCheckpoint(path).ok()) << path;
  }
  auto checkpoint = ReadCheckpoint(manager.LatestPath().value());
  ASSERT_TRUE(checkpoint.ok());
  const int64_t step = checkpoint->global_step;

  // Restarting with max_steps at that step restores and trains nothing: the exported variables
  // must equal the checkpoint's, bit for bit.
  std::string out;
  ASSERT_EQ(RunTrainer(Common(dir) + " --max_steps=" + std::to_string(step), &out), 0) << out;
  EXPECT_NE(out.find("at global step " + std::to_string(step) + " "), std::string::npos) << out;
  // --device=auto: the CPU here, the GPU on a machine with one.
  EXPECT_TRUE(out.find("computing on the CPU with oneDNN kernels") != std::string::npos ||
              out.find("computing on cuda:0") != std::string::npos)
      << out;
  auto exported = ReadSafetensors(dir + "/model.safetensors");
  ASSERT_EQ(exported.size(), 4u);  // conv/weights, conv/bias, fc/weights, fc/bias
  for (const auto& [name, values] : exported) {
    const Tensor& saved = checkpoint->tensors.at(name);
    ASSERT_EQ(static_cast<int64_t>(values.size()), saved.size()) << name;
    EXPECT_EQ(0, std::memcmp(values.data(), saved.data(), saved.bytes())) << name;
  }
  // And training carries on from there to the end.
  ASSERT_EQ(RunTrainer(Common(dir) + " --max_steps=" + std::to_string(step + 30), &out), 0) << out;
  EXPECT_NE(out.find("done: global step " + std::to_string(step + 30)), std::string::npos) << out;
}

TEST(TrainerTest, PartialRestoreLeavesExcludedVariablesAtTheirInitialValues) {
  if (!HaveData()) GTEST_SKIP() << "Fashion-MNIST is not installed (dataset-fashion-mnist)";
  const std::string source = FreshDir("partial_source"), target = FreshDir("partial_target");
  std::string out;
  ASSERT_EQ(RunTrainer(Common(source) + " --max_steps=30", &out), 0) << out;
  auto trained = ReadSafetensors(source + "/model.safetensors");
  ASSERT_EQ(RunTrainer(Common(target) + " --max_steps=30 --checkpoint_path=" + source +
                           "/model.ckpt-30 --restore_exclude=fc/",
                       &out),
            0)
      << out;
  EXPECT_NE(out.find("left at their initial values by --restore_exclude"), std::string::npos)
      << out;
  auto fine_tuned = ReadSafetensors(target + "/model.safetensors");
  EXPECT_EQ(fine_tuned.at("conv/weights"), trained.at("conv/weights"));
  EXPECT_NE(fine_tuned.at("fc/weights"), trained.at("fc/weights"));
  for (float b : fine_tuned.at("fc/bias")) EXPECT_EQ(b, 0.0f);  // initial biases are zero
}

TEST(TrainerTest, ADamagedLatestCheckpointIsSkippedNamingItButANamedOneIsStrict) {
  if (!HaveData()) GTEST_SKIP() << "Fashion-MNIST is not installed (dataset-fashion-mnist)";
  const std::string dir = FreshDir("corrupt");
  std::string out;
  ASSERT_EQ(RunTrainer(Common(dir) + " --max_steps=30 --save_checkpoints_steps=10", &out), 0)
      << out;
  {
    std::fstream f(dir + "/model.ckpt-30", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(300);
    f.put('\x5a');
  }
  // Named with --checkpoint_path, the damaged file is an error naming it.
  EXPECT_EQ(RunTrainer(Common(dir) + " --max_steps=40 --checkpoint_path=model.ckpt-30", &out), 1)
      << out;
  EXPECT_NE(out.find("model.ckpt-30: "), std::string::npos) << out;
  // The latest is skipped with a warning naming it, and the run resumes from the one before.
  ASSERT_EQ(RunTrainer(Common(dir) + " --max_steps=40", &out), 0) << out;
  EXPECT_NE(out.find("skipping checkpoint " + dir + "/model.ckpt-30"), std::string::npos) << out;
  EXPECT_NE(out.find("at global step 20"), std::string::npos) << out;
}

TEST(TrainerTest, BadFlagsAndConfigsStopAtStartWithANamedError) {
  std::string out;
  EXPECT_EQ(RunTrainer("--config=" + TinyConfig(), &out), 2);
  EXPECT_NE(out.find("--train_dir is required"), std::string::npos) << out;

  const std::string dir = FreshDir("badconfig");
  std::ofstream(dir + "/bad.yaml") << "model: {input: [10, 1, 1], layers: [{name: f, type: "
                                      "flatten}, {name: loss, type: softmax_cross_entropy}]}\n"
                                   << "train: {batch_size: 64, learnig_rate: 0.1}\n";
  EXPECT_EQ(RunTrainer("--config=" + dir + "/bad.yaml --train_dir=" + dir, &out), 1);
  EXPECT_NE(out.find(dir + "/bad.yaml"), std::string::npos) << out;
  EXPECT_NE(out.find("unknown field 'learnig_rate'"), std::string::npos) << out;

  EXPECT_NE(RunTrainer("--config=/nonexistent.yaml --train_dir=" + dir, &out), 0);
  EXPECT_NE(out.find("cannot open config file '/nonexistent.yaml'"), std::string::npos) << out;
  EXPECT_NE(RunTrainer("--no_such_flag=1 --train_dir=" + dir, &out), 0);
  EXPECT_NE(out.find("no_such_flag"), std::string::npos) << out;
}

// A run whose model goes non-finite (here SGD at a rate of 1e30) never says "done": it stops at
// the step the loss went NaN, naming it, exits 1, and exports no model.
TEST(TrainerTest, ARunThatDivergesFailsNamingTheStepAndNeverSaysDone) {
  if (!HaveData()) GTEST_SKIP() << "Fashion-MNIST is not installed (dataset-fashion-mnist)";
  const std::string dir = FreshDir("diverges");
  std::ifstream tiny(TinyConfig());
  std::string config((std::istreambuf_iterator<char>(tiny)), std::istreambuf_iterator<char>());
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"{type: adam}", "{type: sgd}"},
                                 {"initial: 0.003", "initial: 1.0e30"}}) {
    const size_t at = config.find(from);
    ASSERT_NE(at, std::string::npos) << from << " not in " << TinyConfig();
    config.replace(at, from.size(), to);
  }
  std::ofstream(dir + "/diverges.yaml") << config;
  std::string out;
  EXPECT_EQ(RunTrainer("--config=" + dir + "/diverges.yaml --train_dir=" + dir +
                           " --log_every_n_steps=10 --eval_every_n_steps=100000 "
                           "--save_checkpoints_secs=0 --max_steps=30",
                       &out),
            1)
      << out;
  EXPECT_NE(out.find("training diverged"), std::string::npos) << out;
  EXPECT_EQ(out.find("done:"), std::string::npos) << out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name == "diverges.yaml" || name == "logs") << "wrote " << name << " over it";
  }
}

TEST(TrainerTest, WritesTrainAndEvalEventsThatTensorBoardReads) {
  if (!HaveData()) GTEST_SKIP() << "Fashion-MNIST is not installed (dataset-fashion-mnist)";
  const std::string python = testing::TestPython();
  if (python.empty() || !fs::exists(python)) {
    GTEST_SKIP() << "no test Python with tensorboard (run scripts/test-venv.sh BUILD_DIR)";
  }
  const std::string dir = FreshDir("events");
  std::string out;
  ASSERT_EQ(RunTrainer(Common(dir) + " --max_steps=40 --eval_every_n_steps=20 "
                                     "--histogram_every_n_steps=20",
                       &out),
            0)
      << out;
  const std::string reader = testing::SourceDir() + "/tests/summary/read_with_tensorboard.py";
  for (const auto& [sub, tag] : std::vector<std::pair<std::string, std::string>>{
           {"train", "loss"}, {"train", "learning_rate"}, {"eval", "accuracy"}}) {
    std::string json;
    FILE* p = popen((python + " " + reader + " " + dir + "/logs/" + sub).c_str(), "r");
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof(buf), p)) json.append(buf, n);
    ASSERT_EQ(pclose(p), 0) << json;
    auto parsed = nlohmann::json::parse(json);
    ASSERT_TRUE(parsed["scalars"].contains(tag)) << sub << ": " << json.substr(0, 500);
    EXPECT_EQ(parsed["scalars"][tag].back()["step"], 40) << tag;
    if (sub == "eval") {
      EXPECT_GT(parsed["scalars"][tag].back()["value"].get<double>(), 0.5);
    } else {
      EXPECT_TRUE(parsed["histograms"].contains("conv/weights/gradient"));
    }
  }
}

TEST(TrainerTest, TrainsFromTfRecordShardsMadeByTheConverter) {
  if (!HaveData()) GTEST_SKIP() << "Fashion-MNIST is not installed (dataset-fashion-mnist)";
  const std::string dir = FreshDir("tfrecord");
  for (const char* split : {"train", "test"}) {
    const std::string cmd = std::string(PSTRAIN_IDX2TFRECORD_BINARY) + " --split=" + split +
                            " --num_shards=3 --output_prefix=" + dir + "/fmnist-" + split + " 2>&1";
    ASSERT_EQ(system(cmd.c_str()), 0) << cmd;
  }
  std::ifstream tiny(TinyConfig());
  std::stringstream text;
  text << tiny.rdbuf() << "input:\n  source: tfrecord\n  tfrecord_pattern: " << dir
       << "/fmnist-train-*\n  test_tfrecord_pattern: " << dir
       << "/fmnist-test-*\n  mean: [0.2860]\n  std: [0.3530]\n";
  std::ofstream(dir + "/tfrecord.yaml") << text.str();
  std::string out;
  ASSERT_EQ(RunTrainer("--config=" + dir + "/tfrecord.yaml --train_dir=" + dir +
                           "/run --max_steps=100 --save_checkpoints_secs=0",
                       &out),
            0)
      << out;
  double accuracy = 0;
  const size_t at = out.rfind("test accuracy ");
  ASSERT_NE(at, std::string::npos) << out;
  accuracy = std::atof(out.c_str() + at + 14);
  EXPECT_GT(accuracy, 0.7) << "100 steps on the shards should learn something: " << out;
}

}  // namespace
}  // namespace pstrain
