// Command-line flags for every pstrain tool: gflags' parser, with --helpshort answered by the
// flags the tool's own sources define. gflags matches --helpshort to a source file named after
// the binary, which pstrain's dashed names (pstrain-train, pstrain-keygen) never are, so it
// printed "No modules matched" and nothing else.
#pragma once

#include <string>
#include <vector>

namespace pstrain {

// gflags::ParseCommandLineFlags(argc, argv, true), except that --helpshort prints the usage
// message and the flags defined in `flag_files` (paths relative to the repository,
// "tools/train_main.cc"), then exits 1 as gflags' own help flags do; and that TensorFlow 1's
// spellings are taken as pstrain's flags or refused naming what to use (tf1_flags.h).
void ParseFlags(int* argc, char*** argv, const std::vector<std::string>& flag_files);

}  // namespace pstrain
