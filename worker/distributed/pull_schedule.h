// When a training step reads the servers' values (--pull_schedule), and which requests it reads
// them with. The whole-step schedule pulls every variable after the step's push, so the next
// forward starts only once the whole model is back, and every gradient is computed on values
// read a whole step before it is applied. The per-layer schedules read each layer's values as its
// forward needs them, as TensorFlow's graph reads a variable when the op that uses it runs:
//
//   step       one pull of every variable after the push (PsClient::PushAndPull, or each part's
//              pull right after it with the overlapped push)
//   per_layer  every layer's pull is sent when the step starts, input side first; the forward
//              of layer L waits only for the pulls that hold L's variables (prefetch)
//   late       layer L's pull is sent just before L's forward and waited for at once: the values
//              are as fresh as they can be (fc1, most of RefNet's parameters, is read after the
//              convolutions' forward and pushed right after its own backward), at a round trip
//              per layer
//
// The per-layer schedules need the overlapped push (push_parts.h): each part's gradients leave
// as backward finishes them, and nothing is pulled after them.
#pragma once

#include <string>
#include <vector>

#include "common/replication/sharding.h"
#include "common/status.h"

namespace pstrain {
namespace worker {

enum class PullSchedule { kStep, kPerLayer, kLate };
// --pull_schedule's default.
constexpr PullSchedule kDefaultPullSchedule = PullSchedule::kLate;

// "step", "per_layer" or "late"; anything else an InvalidArgument naming the value and the
// allowed ones.
Result<PullSchedule> ParsePullSchedule(const std::string& value);
std::string PullScheduleName(PullSchedule schedule);

// A model's layer as the pulls see it: its name and its variables' names (none for most).
struct LayerVariables {
  std::string layer;
  std::vector<std::string> variables;
};

// One request of a per-layer schedule: the partitions of one layer's variables that one server
// holds, in the layer's variable order.
struct LayerPull {
  int layer = 0;  // the model's layer index
  int server = 0;
  std::string label;  // "conv1@ps0", for the step's timeline
  std::vector<replication::Partition> partitions;
};

// The pulls of every layer that has variables, in layer order (input side first), one per server
// that holds some of the layer's variables; `layers` in the model's order. Fails naming a
// partition whose variable no layer has: it would never be read back.
Result<std::vector<LayerPull>> PlanLayerPulls(const replication::Sharding& sharding,
                                              const std::vector<LayerVariables>& layers);

}  // namespace worker
}  // namespace pstrain
