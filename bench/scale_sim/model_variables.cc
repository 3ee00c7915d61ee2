#include "bench/scale_sim/model_variables.h"

namespace scale_sim {

int64_t SimVariable::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<SimVariable> ResNet50Variables() {
  std::vector<SimVariable> out;
  int layer = 0;
  auto conv = [&](const std::string& name, int64_t in, int64_t filters, int64_t kernel) {
    out.push_back({name + "/weights", layer++, true, {filters, in, kernel, kernel}});
  };
  auto batch_norm = [&](const std::string& name, int64_t c) {
    for (const char* v : {"gamma", "beta"}) out.push_back({name + "/" + v, layer, true, {c}});
    for (const char* v : {"moving_mean", "moving_variance"}) {
      out.push_back({name + "/" + v, layer, false, {c}});
    }
    ++layer;
  };
  conv("conv1", 3, 64, 7);
  batch_norm("bn1", 64);
  // Bottleneck width, blocks; the first block of a stage has a projection shortcut.
  const int64_t stages[4][2] = {{64, 3}, {128, 4}, {256, 6}, {512, 3}};
  int64_t channels = 64;
  for (int s = 0; s < 4; ++s) {
    const int64_t width = stages[s][0];
    for (int b = 1; b <= stages[s][1]; ++b) {
      const std::string p = "s" + std::to_string(s + 1) + "b" + std::to_string(b);
      conv(p + "_conv1", channels, width, 1);
      batch_norm(p + "_bn1", width);
      conv(p + "_conv2", width, width, 3);
      batch_norm(p + "_bn2", width);
      conv(p + "_conv3", width, width * 4, 1);
      batch_norm(p + "_bn3", width * 4);
      if (b == 1) {
        conv(p + "_proj", channels, width * 4, 1);
        batch_norm(p + "_proj_bn", width * 4);
      }
      channels = width * 4;
    }
  }
  out.push_back({"fc/weights", layer, true, {1000, channels}});
  out.push_back({"fc/bias", layer, true, {1000}});
  return out;
}

}  // namespace scale_sim
