// Where tests find the source tree (configs, scripts) and the Python with TensorBoard,
// safetensors and numpy: the environment variables PSTRAIN_SOURCE_DIR and PSTRAIN_TEST_PYTHON,
// else the values CMake compiled in.
#pragma once

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

}  // namespace testing
}  // namespace pstrain
