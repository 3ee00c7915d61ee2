// Fuzzes the config reader (common/config.h) and everything that reads a config: the model
// (worker::Model::FromConfig), the train section (worker::ReadTrainConfig, VariableStore,
// optimizer, learning-rate schedule, clipping) and the input section. The input is the YAML text.
// A bad config must be an error naming the field, never a crash, an exception or gigabytes
// allocated (libFuzzer's -rss_limit_mb catches those).
#include <glog/logging.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

#include "common/config.h"
#include "ps/clipping.h"
#include "ps/learning_rate.h"
#include "ps/optimizer.h"
#include "ps/variable_store.h"
#include "worker/network/model.h"
#include "worker/training/input/input_options.h"
#include "worker/training/train_config.h"

namespace pstrain {
namespace {

constexpr const char* kOrigin = "fuzz.yaml";

bool g_verbose = false;  // PSTRAIN_FUZZ_LOG=1: print every refusal

// Every refusal names where in the config it is.
void CheckNamed(const Status& s) {
  if (s.ok()) return;
  if (g_verbose) std::fprintf(stderr, "refused: %s\n", s.ToString().c_str());
  CHECK(s.message().find(kOrigin) != std::string::npos)
      << "an error does not name the config: " << s.ToString();
}

void ReadModel(const ConfigNode& config) {
  auto node = config.Child("model");
  if (!node.ok()) return;
  auto model = worker::Model::FromConfig(*node);
  CheckNamed(model.status());
  if (!model.ok()) return;
  (*model)->Summary();
  CHECK_GE((*model)->num_parameters(), 0);
}

void ReadTrain(const ConfigNode& config) {
  auto train = config.Child("train");
  if (!train.ok()) return;
  CheckNamed(worker::ReadTrainConfig(*train).status());
  CheckNamed(ps::VariableStore::FromConfig(*train).status());
  if (auto node = train->Child("optimizer"); node.ok()) {
    CheckNamed(ps::Optimizer::FromConfig(*node).status());
  }
  if (auto node = train->Child("clipping"); node.ok()) {
    CheckNamed(ps::ClippingOptions::FromConfig(*node).status());
  }
  if (auto node = train->Child("learning_rate"); node.ok()) {
    auto schedule = ps::LearningRateSchedule::FromConfig(*node);
    CheckNamed(schedule.status());
    if (schedule.ok()) {
      for (int64_t step :
           {int64_t{0}, int64_t{1}, int64_t{1000000}, std::numeric_limits<int64_t>::max()}) {
        schedule->At(step);
      }
    }
  }
}

void ReadInput(const ConfigNode& config) {
  auto node = config.Child("input");
  if (!node.ok()) return;
  CheckNamed(InputOptions::FromConfig(*node).status());
}

}  // namespace
}  // namespace pstrain

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Refusals are logged; PSTRAIN_FUZZ_LOG=1 shows them when replaying one input.
  pstrain::g_verbose = std::getenv("PSTRAIN_FUZZ_LOG") != nullptr;
  FLAGS_minloglevel = pstrain::g_verbose ? 0 : 3;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain;
  const std::string text(reinterpret_cast<const char*>(data), size);
  Result<ConfigNode> config = ConfigNode::Parse(text, kOrigin);
  CheckNamed(config.status());
  if (!config.ok()) return 0;
  config->ToYaml();
  ReadModel(*config);
  ReadTrain(*config);
  ReadInput(*config);
  return 0;
}
