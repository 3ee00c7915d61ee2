#include "common/flags.h"

#include <gflags/gflags.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/status.h"
#include "common/tf1_flags.h"

namespace pstrain {

namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool Defined(const std::string& name) {
  gflags::CommandLineFlagInfo info;
  return gflags::GetCommandLineFlagInfo(name.c_str(), &info);
}

// argv with TensorFlow 1's spellings as pstrain's flags (tf1_flags.h); stops at a refused one.
void TranslateArgs(int* argc, char*** argv) {
  static std::vector<std::string> args;
  static std::vector<char*> pointers;
  args.assign(*argv + 1, *argv + *argc);
  if (Status s = TranslateTf1Flags(&args, Defined); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", gflags::ProgramInvocationShortName(), s.message().c_str());
    std::exit(1);  // as gflags does for an unknown flag
  }
  pointers.assign(1, (*argv)[0]);
  for (std::string& a : args) pointers.push_back(a.data());
  pointers.push_back(nullptr);
  *argc = static_cast<int>(pointers.size()) - 1;
  *argv = pointers.data();
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
    const std::string tf1 = DescribeTf1Flags(Defined);
    if (!tf1.empty()) std::printf("\n  TensorFlow 1's spellings, taken as:\n%s", tf1.c_str());
    std::fflush(stdout);
    std::exit(1);  // as gflags' own --help and --helpshort do
  }
  TranslateArgs(argc, argv);
  gflags::ParseCommandLineFlags(argc, argv, true);
}

}  // namespace pstrain
