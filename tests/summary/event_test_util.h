// Helpers for the summary tests: temporary log dirs, finding and reading event files, and
// running the Python readers beside this file.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "common/summary/proto/event.pb.h"

namespace pstrain {

// A new empty directory under the test's temp dir, removed with everything in it when this
// goes out of scope.
class ScopedLogdir {
 public:
  explicit ScopedLogdir(const std::string& name);
  ~ScopedLogdir();
  ScopedLogdir(const ScopedLogdir&) = delete;
  ScopedLogdir& operator=(const ScopedLogdir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};
// Paths of the files in `dir` whose names contain "tfevents", sorted.
std::vector<std::string> EventFiles(const std::string& dir);
// Every record of an event file, parsed with our protos (CRCs checked by RecordReader).
Result<std::vector<tensorflow::Event>> ReadEvents(const std::string& path);

// PSTRAIN_TEST_PYTHON, or "" when it is unset or not a file.
std::string TestPythonFromEnv();
// tests/summary/<name> under PSTRAIN_SOURCE_DIR, or "" when that is unset.
std::string ScriptPath(const std::string& name);

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout; stderr goes to the test log
};
// Runs `python script args...` and captures its stdout.
CommandResult RunPython(const std::string& python, const std::string& script,
                        const std::vector<std::string>& args);

}  // namespace pstrain
