// What every target does once at start (LLVMFuzzerInitialize): logs quiet unless
// PSTRAIN_FUZZ_LOG is set (refusals are logged, and a fuzzer makes millions), and, for targets
// that read files, a fresh temp directory of this process, removed at exit.
#pragma once

#include <glog/logging.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace pstrain {
namespace fuzz {

inline void QuietLogs() { FLAGS_minloglevel = std::getenv("PSTRAIN_FUZZ_LOG") ? 0 : 3; }

// "/tmp/pstrain-fuzz-<name>-XXXXXX", created now and removed when the process exits.
inline std::string TempDirForProcess(const std::string& name) {
  static std::string dir;
  std::string pattern = "/tmp/pstrain-fuzz-" + name + "-XXXXXX";
  CHECK(mkdtemp(pattern.data()) != nullptr) << "mkdtemp " << pattern;
  dir = pattern;
  atexit([] { std::filesystem::remove_all(dir); });
  return dir;
}

}  // namespace fuzz
}  // namespace pstrain
