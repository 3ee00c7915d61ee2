// Shared by the checkpoint tests: a scratch directory per test, a small model's tensors, file
// bytes, and running the venv Python (PSTRAIN_TEST_PYTHON) for independent readers.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "common/checkpoint/checkpoint.h"
#include "common/tensor.h"

namespace pstrain {
namespace testing_util {

class ScratchDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "pstrain-ckpt-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  std::string dir_;
};

// Distinct, non-trivial values per tensor (seeded by `seed`) so mix-ups are caught.
inline Tensor Pattern(Shape shape, float seed) {
  Tensor t = Tensor::Uninitialized(std::move(shape));
  for (int64_t i = 0; i < t.size(); ++i) t[i] = seed + 0.001f * static_cast<float>(i) - 0.37f;
  return t;
}

// A tiny conv net's variables, an Adam slot and batch-norm statistics.
inline CheckpointData SmallModel(int64_t step, float seed = 1.0f) {
  CheckpointData d;
  d.global_step = step;
  d.tensors["conv1/weights"] = Pattern(Shape{4, 1, 3, 3}, seed);
  d.tensors["conv1/weights/Adam_m"] = Pattern(Shape{4, 1, 3, 3}, seed + 10);
  d.tensors["conv1/bias"] = Pattern(Shape{4}, seed + 20);
  d.tensors["bn1/moving_mean"] = Pattern(Shape{4}, seed + 30);
  d.tensors["fc2/weights"] = Pattern(Shape{10, 8}, seed + 40);
  d.tensors["fc2/bias"] = Pattern(Shape{10}, seed + 50);
  d.metadata["model"] = "smallnet";
  d.metadata["config_hash"] = "9f2c";
  return d;
}

inline bool BitwiseEqual(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string ScriptPath(const std::string& name) {
  return std::string(PSTRAIN_CHECKPOINT_TEST_DIR) + "/" + name;
}

// The venv Python if it can import `modules`; otherwise "" and *why says what is missing.
inline std::string TestPython(const std::string& modules, std::string* why) {
  const char* python = std::getenv("PSTRAIN_TEST_PYTHON");
  // The build's venv when the environment names none (ctest, or running the binary by hand).
  if (python == nullptr || python[0] == '\0') python = PSTRAIN_DEFAULT_TEST_PYTHON;
  if (python[0] == '\0') {
    *why = "PSTRAIN_TEST_PYTHON is not set (make it with scripts/test-venv.sh BUILD_DIR)";
    return "";
  }
  std::string cmd = "'" + std::string(python) + "' -c 'import " + modules + "' 2>/dev/null";
  if (std::system(cmd.c_str()) != 0) {
    *why = std::string(python) + " cannot import " + modules + " (run scripts/test-venv.sh)";
    return "";
  }
  return python;
}

// Runs `command`, returns its stdout; *exit_code is its exit status.
inline std::string RunAndCapture(const std::string& command, int* exit_code) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    *exit_code = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  int status = pclose(pipe);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

}  // namespace testing_util
}  // namespace pstrain
