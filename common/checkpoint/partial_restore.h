// Restoring a subset of a checkpoint into existing tensors, for fine-tuning: e.g. every layer
// but the classifier ("fc2/"), or only "conv*" layers. Values are copied into the targets'
// buffers, so variables that share those buffers (a variable store) see them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/checkpoint/checkpoint.h"
#include "common/status.h"
#include "common/tensor.h"

namespace pstrain {

// A pattern with '*', '?' or '[' is a glob over the whole name, where '*' also matches '/';
// any other pattern is a name prefix ("fc2/" matches "fc2/weights" and "fc2/weights/Adam_m").
struct RestoreFilter {
  std::vector<std::string> include;  // empty: every name
  std::vector<std::string> exclude;  // applied after include

  bool Accepts(const std::string& name) const;
};

struct RestoreReport {
  std::vector<std::string> restored;  // copied from the checkpoint
  std::vector<std::string> filtered;  // targets the filter left untouched
  std::vector<std::string> missing;   // targets the filter accepts but the checkpoint lacks
  std::vector<std::string> unused;    // accepted checkpoint tensors with no target
};

// Copies each accepted tensor of `checkpoint` into the target of the same name. A shape
// mismatch is InvalidArgument naming the tensor and both shapes, and then nothing is copied.
// Missing targets are only reported: whether they are an error is the caller's decision.
Result<RestoreReport> RestoreInto(const CheckpointData& checkpoint, const RestoreFilter& filter,
                                  std::map<std::string, Tensor>* targets);

}  // namespace pstrain
