// The main() of a command-line tool that takes flags only and does one job: pstrain-idx2tfrecord,
// pstrain-synth-ctr and the benchmarks. Their flags, their log on the terminal and their exit
// status are then the same for all, and each main() is its usage line and its job.
#pragma once

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <functional>

#include "common/flags.h"
#include "common/status.h"

namespace pstrain {

// Parses the flags (ParseFlags; --helpshort lists those `flag_file` defines), logs to stderr,
// then runs `job`: exit status 0, or 1 with its error logged.
inline int RunTool(int argc, char** argv, const char* usage, const char* flag_file,
                   const std::function<Status()>& job) {
  gflags::SetUsageMessage(usage);
  FLAGS_logtostderr = true;  // a command-line tool: progress goes to the terminal
  ParseFlags(&argc, &argv, {flag_file});
  google::InitGoogleLogging(argv[0]);
  const Status s = job();
  if (!s.ok()) {
    LOG(ERROR) << s.ToString();
    return 1;
  }
  return 0;
}

}  // namespace pstrain

// main() of a tool whose flags are defined in the file it stands in, RunTool's `flag_file` as
// the compiler names that file (the benchmarks'; the tools above name theirs from the
// repository's root, as --helpshort prints it).
#define PSTRAIN_TOOL_MAIN(usage, job) \
  int main(int argc, char** argv) { return ::pstrain::RunTool(argc, argv, usage, __FILE__, job); }
