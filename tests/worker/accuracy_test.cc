// The accuracy targets, reached by the trainer binary exactly as the README runs it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "tests/test_env.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

double TrainToTarget(const std::string& config, double target, int epochs, std::string* out) {
  const std::string dir = ::testing::TempDir() + "/accuracy_" + fs::path(config).stem().string() +
                          "_" + std::to_string(getpid());
  fs::remove_all(dir);
  const std::string cmd = std::string(PSTRAIN_TRAIN_BINARY) + " --config=" + testing::SourceDir() +
                          "/configs/" + config + " --train_dir=" + dir +
                          " --stop_at_accuracy=" + std::to_string(target) +
                          " --epochs=" + std::to_string(epochs) + " --log_every_n_steps=200 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out->append(buf, n);
  EXPECT_EQ(pclose(p), 0) << *out;
  double accuracy = 0;
  size_t at = out->rfind("done: global step");
  if (at != std::string::npos) {
    std::sscanf(out->c_str() + at, "done: global step %*d, test accuracy %lf", &accuracy);
  }
  return accuracy;
}

TEST(AccuracyTest, RefNetReaches91PercentOnFashionMnist) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed (dataset-fashion-mnist)";
  }
  std::string out;
  EXPECT_GE(TrainToTarget("refnet.yaml", 0.91, 6, &out), 0.91) << out;
}

}  // namespace
}  // namespace pstrain
