// TensorFlow 1's spellings of flags, for people who bring their TF-1 command lines: where pstrain
// has a flag of the same meaning the spelling is an alias for it (--allow_growth is
// --gpu_allow_growth, --model_dir is --train_dir, --sync_replicas is --update_mode=sync); where it
// has none, the spelling stops the tool at start with a message naming what pstrain has instead
// (a config key, an environment variable, another flag), rather than gflags' bare "unknown
// command line flag".
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace pstrain {

// Rewrites `args` (argv without the program name) in place. `defined(name)`: whether this tool
// has the pstrain flag `name`; a TF-1 spelling whose pstrain flag the tool lacks is left for
// gflags to refuse. InvalidArgument naming the TF-1 flag and what to use for a refused spelling.
Status TranslateTf1Flags(std::vector<std::string>* args,
                         const std::function<bool(const std::string&)>& defined);

// One line per TF-1 spelling the tool takes (among those `defined`), for --helpshort.
std::string DescribeTf1Flags(const std::function<bool(const std::string&)>& defined);

}  // namespace pstrain
