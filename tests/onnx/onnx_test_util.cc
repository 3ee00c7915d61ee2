#include "tests/onnx/onnx_test_util.h"

#include <sys/wait.h>

#include <cstdio>
#include <fstream>

#include "tests/test_env.h"

namespace pstrain::testing {

std::string OnnxPython(std::string* why) {
  const std::string python = TestPython();
  int code = 0;
  std::string out = RunCommand("'" + python + "' -c 'import onnx, onnxruntime, numpy'", &code);
  if (python.empty() || code != 0) {
    *why = "onnx or onnxruntime is missing from the test Python '" + python +
           "' (bash scripts/test-venv.sh BUILD_DIR installs them): " + out;
    return "";
  }
  return python;
}

void WriteFloats(const std::string& path, const Tensor& t) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(t.data()), t.bytes());
}

}  // namespace pstrain::testing
