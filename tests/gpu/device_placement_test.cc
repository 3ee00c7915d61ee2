// Device choice from the flags, tested on any machine: the decision is a function of the options
// and of what the CUDA runtime reports, so every GPU situation is simulated here.
#include "worker/network/device_placement.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace pstrain {
namespace worker {
namespace {

DeviceOptions Options(const std::string& device, bool soft = true) {
  DeviceOptions o;
  o.device = device;
  o.allow_soft_placement = soft;
  return o;
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(DevicePlacementTest, CpuIsChosenWithoutLookingForGpus) {
  auto c = ChooseDevice(Options("cpu", false), Unavailable("no driver"), true, nullptr);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->device, Device::kCpu);
  EXPECT_TRUE(c->warning.empty());
}

TEST(DevicePlacementTest, AutoAndGpuTakeAVisibleGpu) {
  for (const char* device : {"auto", "gpu"}) {
    auto c = ChooseDevice(Options(device), Result<int>(2), true, "0,1");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->device, Device::kGpu) << device;
    EXPECT_TRUE(c->warning.empty());
  }
}

TEST(DevicePlacementTest, SoftPlacementFallsBackToTheCpuWithAWarningNamingTheMask) {
  for (const char* device : {"auto", "gpu"}) {
    auto c = ChooseDevice(Options(device), Result<int>(0), true, "");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->device, Device::kCpu);
    EXPECT_TRUE(Contains(c->warning, "no GPU is visible")) << c->warning;
    EXPECT_TRUE(Contains(c->warning, "CUDA_VISIBLE_DEVICES=\"\"")) << c->warning;
    EXPECT_TRUE(Contains(c->warning, "--allow_soft_placement=true")) << c->warning;
  }
  // The runtime failing to count (no driver) is the same situation, with its reason.
  auto c = ChooseDevice(Options("gpu"), Unavailable("cudaGetDeviceCount failed: no driver"), true,
                        nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->device, Device::kCpu);
  EXPECT_TRUE(Contains(c->warning, "CUDA_VISIBLE_DEVICES unset")) << c->warning;
  EXPECT_TRUE(Contains(c->warning, "no driver")) << c->warning;
}

TEST(DevicePlacementTest, WithoutSoftPlacementNoVisibleGpuIsAnErrorNamingFlagAndMask) {
  for (const char* device : {"auto", "gpu"}) {
    auto c = ChooseDevice(Options(device, false), Result<int>(0), true, "3");
    ASSERT_FALSE(c.ok());
    const std::string& m = c.status().message();
    EXPECT_EQ(c.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_TRUE(Contains(m, "--allow_soft_placement=false")) << m;
    EXPECT_TRUE(Contains(m, "CUDA_VISIBLE_DEVICES=\"3\"")) << m;
    EXPECT_TRUE(Contains(m, std::string("--device=") + device)) << m;
  }
}

TEST(DevicePlacementTest, ABinaryWithoutTheCudaBackendCountsAsNoGpu) {
  auto soft = ChooseDevice(Options("gpu"), Result<int>(1), false, nullptr);
  ASSERT_TRUE(soft.ok());
  EXPECT_EQ(soft->device, Device::kCpu);
  EXPECT_TRUE(Contains(soft->warning, "built without the CUDA backend")) << soft->warning;
  auto strict = ChooseDevice(Options("gpu", false), Result<int>(1), false, nullptr);
  ASSERT_FALSE(strict.ok());
  EXPECT_TRUE(Contains(strict.status().message(), "built without the CUDA backend"));
}

TEST(DevicePlacementTest, BadFlagValuesAreRefusedByName) {
  auto bad_device = ChooseDevice(Options("tpu"), Result<int>(1), true, nullptr);
  ASSERT_FALSE(bad_device.ok());
  EXPECT_TRUE(Contains(bad_device.status().message(), "--device must be auto, cpu or gpu"));
  for (double fraction : {0.0, -0.5, 1.5}) {
    DeviceOptions o;
    o.gpu_memory_fraction = fraction;
    Status s = ValidateDeviceOptions(o);
    ASSERT_FALSE(s.ok()) << fraction;
    EXPECT_TRUE(Contains(s.message(), "--gpu_memory_fraction must be in (0, 1]")) << s.message();
  }
  for (int64_t mb : {int64_t{0}, int64_t{-1}, int64_t{1} << 40}) {
    DeviceOptions o;
    o.cudnn_workspace_limit_mb = mb;
    Status s = ValidateDeviceOptions(o);
    ASSERT_FALSE(s.ok()) << mb;
    EXPECT_TRUE(Contains(s.message(), "--cudnn_workspace_limit_mb must be in [1, 1048576]"))
        << s.message();
  }
  for (int candidates : {0, -3, 257}) {
    DeviceOptions o;
    o.cudnn_graph_candidates = candidates;
    Status s = ValidateDeviceOptions(o);
    ASSERT_FALSE(s.ok()) << candidates;
    EXPECT_TRUE(Contains(s.message(), "--cudnn_graph_candidates must be in [1, 256], got " +
                                          std::to_string(candidates)))
        << s.message();
  }
  for (double margin : {-0.1, 1.0, 2.5}) {
    DeviceOptions o;
    o.cudnn_graph_margin = margin;
    Status s = ValidateDeviceOptions(o);
    ASSERT_FALSE(s.ok()) << margin;
    EXPECT_TRUE(Contains(s.message(), "--cudnn_graph_margin must be in [0, 1)")) << s.message();
  }
  DeviceOptions o;
  o.gpu_memory_fraction = 0.25;
  o.cudnn_workspace_limit_mb = 512;
  o.cudnn_graph_candidates = 256;
  o.cudnn_graph_margin = 0.0;
  EXPECT_TRUE(ValidateDeviceOptions(o).ok());
}

TEST(DevicePlacementTest, OpenOnTheCpuPlacesAModelThere) {
  DeviceOptions o = Options("cpu");
  o.log_device_placement = true;
  auto device = ComputeDevice::Open(o, "test");
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  EXPECT_EQ((*device)->device(), Device::kCpu);
  EXPECT_EQ((*device)->gpu(), nullptr);
  EXPECT_TRUE(Contains((*device)->Description(), "CPU")) << (*device)->Description();
  EXPECT_EQ((*device)->MemoryStatsLine(), "");
  auto node = ConfigNode::Parse(
      "{input: [1, 4, 4], layers: [{name: f, type: flatten}, {name: fc, type: fully_connected, "
      "units: 3}, {name: loss, type: softmax_cross_entropy}]}",
      "model.yaml");
  auto model = Model::FromConfig(node.value());
  ASSERT_TRUE(model.ok());
  ASSERT_TRUE((*device)->Place(model->get()).ok());
  for (const auto& l : (*model)->layers()) EXPECT_EQ(l->device(), Device::kCpu);
}

TEST(DevicePlacementTest, OpenWithNoVisibleGpuFollowsSoftPlacement) {
  // Hide every GPU from this process's CUDA runtime (it reads the variable once, at its first
  // call, which this test may not be; then a visible GPU makes the test skip).
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  auto soft = ComputeDevice::Open(Options("gpu"), "test");
  ASSERT_TRUE(soft.ok()) << soft.status().ToString();
  if ((*soft)->device() == Device::kGpu) GTEST_SKIP() << "a GPU was already visible";
  EXPECT_EQ((*soft)->gpu(), nullptr);
  auto strict = ComputeDevice::Open(Options("gpu", false), "test");
  ASSERT_FALSE(strict.ok());
  EXPECT_TRUE(Contains(strict.status().message(), "--allow_soft_placement=false"))
      << strict.status().message();
}

TEST(DevicePlacementTest, SetDeviceGpuRefusesWithoutAContextOrBackend) {
  auto node = ConfigNode::Parse(
      "{input: [1, 4, 4], layers: [{name: f, type: flatten}, {name: fc, type: fully_connected, "
      "units: 3}, {name: loss, type: softmax_cross_entropy}]}",
      "model.yaml");
  auto model = Model::FromConfig(node.value());
  ASSERT_TRUE(model.ok());
  if (GpuBackendBuilt()) {
    // With the backend, a GPU placement without a context is a programmer's error.
    EXPECT_DEATH((void)(*model)->SetDevice(Device::kGpu, nullptr), "needs a GPU context");
    return;
  }
  Status s = (*model)->SetDevice(Device::kGpu, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.message(), "built without the CUDA backend")) << s.message();
  EXPECT_EQ((*model)->device(), Device::kCpu);
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
