// Where tests find the source tree (configs, scripts) and the Python with TensorBoard,
// safetensors and numpy: the environment variables PSTRAIN_SOURCE_DIR and PSTRAIN_TEST_PYTHON,
// else the values CMake compiled in; and running a command line as a test's subject.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace pstrain {
namespace testing {

inline std::string SourceDir() {
  const char* d = std::getenv("PSTRAIN_SOURCE_DIR");
#ifdef PSTRAIN_SOURCE_DIR_DEFAULT
  if (!d || !*d) d = PSTRAIN_SOURCE_DIR_DEFAULT;
#endif
  return d ? d : "";
}

inline std::string TestPython() {
  const char* p = std::getenv("PSTRAIN_TEST_PYTHON");
#ifdef PSTRAIN_TEST_PYTHON_DEFAULT
  if (!p || !*p) p = PSTRAIN_TEST_PYTHON_DEFAULT;
#endif
  return p ? p : "";
}

// Runs `command` in a shell: its stdout and stderr together, and in `exit_code` its exit status
// (-1 when it did not exit normally or could not start).
inline std::string RunCommand(const std::string& command, int* exit_code) {
  std::string out;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    *exit_code = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

}  // namespace testing
}  // namespace pstrain
