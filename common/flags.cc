#include "common/flags.h"

#include <gflags/gflags.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace pstrain {

namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

void ParseFlags(int* argc, char*** argv, const std::vector<std::string>& flag_files) {
  gflags::SetArgv(*argc, const_cast<const char**>(*argv));  // the program's name for the usage
  for (int i = 1; i < *argc; ++i) {
    const char* a = (*argv)[i];
    if (std::strcmp(a, "--helpshort") != 0 && std::strcmp(a, "-helpshort") != 0) continue;
    std::printf("%s: %s\n", gflags::ProgramInvocationShortName(), gflags::ProgramUsage());
    std::vector<gflags::CommandLineFlagInfo> flags;
    gflags::GetAllFlags(&flags);
    for (const std::string& file : flag_files) {
      std::printf("\n  Flags from %s:\n", file.c_str());
      for (const gflags::CommandLineFlagInfo& flag : flags) {
        if (EndsWith(flag.filename, file)) std::printf("%s", gflags::DescribeOneFlag(flag).c_str());
      }
    }
    std::fflush(stdout);
    std::exit(1);  // as gflags' own --help and --helpshort do
  }
  gflags::ParseCommandLineFlags(argc, argv, true);
}

}  // namespace pstrain
