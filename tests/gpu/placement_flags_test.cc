// The device flags as a user meets them: pstrain-train with --device, --allow_soft_placement,
// --log_device_placement and --gpu_memory_fraction, with CUDA_VISIBLE_DEVICES="" so that the
// no-GPU behaviour is tested on GPU machines too.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/test_env.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

bool HaveData() {
  return fs::exists("/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz");
}

// PSTRAIN_TRAIN_BINARY in the environment: the trainer where it is not where CMake built it (a
// GPU machine that got the binaries packed, scripts/gpu_check.sh).
std::string TrainBinary() {
  const char* b = std::getenv("PSTRAIN_TRAIN_BINARY");
  return b && *b ? b : PSTRAIN_TRAIN_BINARY;
}

int RunTrainer(const std::string& env, const std::string& args, std::string* output) {
  const std::string dir = ::testing::TempDir() + "/placement_flags_test";
  fs::remove_all(dir);
  const std::string cmd = env + " " + TrainBinary() + " --config=" + testing::SourceDir() +
                          "/tests/worker/testdata/tiny.yaml --train_dir=" + dir +
                          " --save_checkpoints_secs=0 " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  output->clear();
  while (size_t n = fread(buf, 1, sizeof(buf), p)) output->append(buf, n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(PlacementFlagsTest, NoVisibleGpuWithoutSoftPlacementStopsNamingFlagAndMask) {
  std::string out;
  const int rc =
      RunTrainer("CUDA_VISIBLE_DEVICES=", "--device=gpu --allow_soft_placement=false", &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_TRUE(Contains(out, "--allow_soft_placement=false")) << out;
  EXPECT_TRUE(Contains(out, "CUDA_VISIBLE_DEVICES")) << out;
}

TEST(PlacementFlagsTest, NoVisibleGpuWithSoftPlacementTrainsOnTheCpuWithAWarning) {
  if (!HaveData()) GTEST_SKIP() << "Fashion-MNIST not in /usr/share/datasets/fashion-mnist";
  std::string out;
  const int rc = RunTrainer("CUDA_VISIBLE_DEVICES=",
                            "--device=gpu --log_device_placement --max_steps=3 "
                            "--eval_every_n_steps=100000 --log_every_n_steps=1",
                            &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(Contains(out, "computing on the CPU instead")) << out;
  EXPECT_TRUE(Contains(out, "layer 'conv' (conv2d) placed on /device:CPU:0")) << out;
  EXPECT_TRUE(Contains(out, "done: global step 3")) << out;
}

TEST(PlacementFlagsTest, BadDeviceFlagsStopAtStart) {
  std::string out;
  EXPECT_EQ(RunTrainer("", "--device=tpu", &out), 2) << out;
  EXPECT_TRUE(Contains(out, "--device must be auto, cpu or gpu")) << out;
  EXPECT_EQ(RunTrainer("", "--gpu_memory_fraction=0", &out), 2) << out;
  EXPECT_TRUE(Contains(out, "--gpu_memory_fraction must be in (0, 1]")) << out;
}

// "done: global step 60, test accuracy 0.7233, ..." -> 0.7233 (-1 when absent).
double FinalAccuracy(const std::string& out) {
  const std::string key = "test accuracy ";
  const size_t at = out.find(key, out.find("done: global step"));
  return at == std::string::npos ? -1.0 : std::stod(out.substr(at + key.size()));
}

TEST(PlacementFlagsTest, TrainerOnTheGpuLearnsAsOnTheCpu) {
  if (!HaveData()) GTEST_SKIP() << "Fashion-MNIST not in /usr/share/datasets/fashion-mnist";
  const std::string steps =
      " --max_steps=60 --log_every_n_steps=20 --eval_every_n_steps=100000 --log_device_placement";
  std::string gpu_out, cpu_out;
  const int rc = RunTrainer("", "--device=gpu --allow_soft_placement=false" + steps, &gpu_out);
  if (rc == 1 && (Contains(gpu_out, "no GPU is visible") ||
                  Contains(gpu_out, "built without the CUDA backend"))) {
    GTEST_SKIP() << "no GPU visible (CUDA_VISIBLE_DEVICES=...): the trainer said\n" << gpu_out;
  }
  ASSERT_EQ(rc, 0) << gpu_out;
  EXPECT_TRUE(Contains(gpu_out, "computing on cuda:0")) << gpu_out;
  EXPECT_TRUE(Contains(gpu_out, "layer 'conv' (conv2d) placed on /device:GPU:0")) << gpu_out;
  EXPECT_TRUE(Contains(gpu_out, "GPU memory: in use")) << gpu_out;
  ASSERT_EQ(RunTrainer("", "--device=cpu" + steps, &cpu_out), 0) << cpu_out;
  // The same model, data order and initial values: only float rounding differs.
  const double gpu_acc = FinalAccuracy(gpu_out), cpu_acc = FinalAccuracy(cpu_out);
  EXPECT_GT(gpu_acc, 0.6) << gpu_out;
  EXPECT_NEAR(gpu_acc, cpu_acc, 0.02) << gpu_out << cpu_out;
}

}  // namespace
}  // namespace pstrain
