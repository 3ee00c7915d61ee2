// Every layer's GPU forward and backward pass against the CPU's, one test per case of
// tests/worker/layer_cases.h (the cases the numeric gradient checks run too): outputs, input
// gradients, variable gradients and (batch norm) the updated moving statistics. Skips when no
// GPU is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tests/gpu/gpu_test_util.h"
#include "tests/worker/gradient_checker.h"
#include "worker/network/cuda/device_mirrors.h"

namespace pstrain {
namespace worker {
namespace testing {
namespace {

// Returns the largest |gpu - cpu| / max(1, |cpu|) seen, which the case prints.
float ExpectClose(const Tensor& gpu, const Tensor& cpu, float tol, const std::string& what) {
  EXPECT_EQ(gpu.shape(), cpu.shape()) << what;
  if (gpu.shape() != cpu.shape()) return INFINITY;
  int failures = 0;
  float worst = 0;
  for (int64_t i = 0; i < cpu.size(); ++i) {
    const float scale = std::max(1.0f, std::fabs(cpu[i]));
    const float error = std::fabs(gpu[i] - cpu[i]) / scale;
    worst = std::isnan(error) ? INFINITY : std::max(worst, error);
    if (!(std::fabs(gpu[i] - cpu[i]) <= tol * scale) && failures++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: GPU " << gpu[i] << " vs CPU " << cpu[i];
    }
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << cpu.size() << " differ";
  return worst;
}

// Runs the same layer (same initial variables) on both devices and compares everything.
void CompareDevices(const LayerCase& c, cuda::GpuContext* gpu) {
  Shape out_shape;
  std::unique_ptr<Layer> cpu_layer = MakeCaseLayer(c, &out_shape);
  std::unique_ptr<Layer> gpu_layer = MakeCaseLayer(c, &out_shape);
  ASSERT_TRUE(cuda::MirrorOnGpu(gpu_layer.get(), gpu).ok());

  std::mt19937_64 data_rng(11);  // the output gradient
  std::vector<Tensor> x = CaseInputs(c), dx_cpu, dx_dev;
  std::vector<const Tensor*> in_cpu, in_dev;
  std::vector<Tensor*> grads_cpu, grads_dev;
  std::vector<Tensor> x_dev;
  for (const Tensor& t : x) x_dev.push_back(ToDevice(t, gpu));
  for (size_t i = 0; i < x.size(); ++i) {
    in_cpu.push_back(&x[i]);
    in_dev.push_back(&x_dev[i]);
    dx_cpu.push_back(Tensor::Filled(x[i].shape(), NAN));
    dx_dev.push_back(gpu->NewTensorOrDie(x[i].shape(), "input gradient"));
  }
  for (size_t i = 0; i < x.size(); ++i) {
    grads_cpu.push_back(&dx_cpu[i]);
    grads_dev.push_back(&dx_dev[i]);
  }

  Tensor labels_dev;
  if (!c.labels.empty()) {
    labels_dev = gpu->NewTensorOrDie(Shape{static_cast<int64_t>(c.labels.size())}, "labels");
    gpu->UploadBytes(c.labels.data(), labels_dev.data(), c.labels.size() * sizeof(int32_t));
  }
  std::mt19937_64 rng_cpu(1), rng_gpu(1);
  LayerContext ctx_cpu{c.training, &rng_cpu, &c.labels};
  LayerContext ctx_gpu{c.training, &rng_gpu, &c.labels, gpu,
                       reinterpret_cast<const int32_t*>(labels_dev.data())};

  const Shape y_shape = Batched(c.batch, out_shape);
  Tensor y_cpu = Tensor::Uninitialized(y_shape);
  Tensor y_dev = gpu->NewTensorOrDie(y_shape, "output");
  cpu_layer->Forward(in_cpu, &y_cpu, ctx_cpu);
  gpu_layer->Forward(in_dev, &y_dev, ctx_gpu);
  float worst = ExpectClose(ToHost(y_dev, gpu), y_cpu, c.device_tolerance, "output");

  Tensor dy = RandomTensor(y_shape, &data_rng);
  Tensor dy_dev = ToDevice(dy, gpu);
  cpu_layer->Backward(in_cpu, y_cpu, dy, grads_cpu, ctx_cpu);
  gpu_layer->Backward(in_dev, y_dev, dy_dev, grads_dev, ctx_gpu);
  for (size_t i = 0; i < x.size(); ++i) {
    worst = std::max(worst, ExpectClose(ToHost(dx_dev[i], gpu), dx_cpu[i], c.device_tolerance,
                                        "input " + std::to_string(i) + " gradient"));
  }
  std::vector<Variable*> vars;
  for (Variable& v : gpu_layer->variables()) vars.push_back(&v);
  cuda::DownloadToHost(vars, /*all_values=*/true, gpu);
  for (size_t i = 0; i < vars.size(); ++i) {
    const Variable& want = cpu_layer->variables()[i];
    if (want.trainable) {
      worst = std::max(worst, ExpectClose(vars[i]->grad, want.grad, c.device_tolerance,
                                          want.name + " gradient"));
    }
    worst = std::max(worst, ExpectClose(vars[i]->value, want.value, c.device_tolerance, want.name));
  }
  // docs/gpu.md reports this per case: the largest relative error over output and gradients.
  std::printf("[ max rel error ] %s: %.3g (tolerance %.3g)\n", c.name.c_str(), worst,
              c.device_tolerance);
}

class LayerCaseDevicesTest : public ::testing::TestWithParam<LayerCase> {};

TEST_P(LayerCaseDevicesTest, GpuMatchesCpu) {
  PSTRAIN_GPU_OR_SKIP(gpu);
  CompareDevices(GetParam(), gpu);
}

INSTANTIATE_TEST_SUITE_P(LayerCases, LayerCaseDevicesTest,
                         ::testing::ValuesIn(CasesWhere(&LayerCase::compare_devices)), CaseName);

class LayersGpuTest : public ::testing::Test {};

TEST_F(LayersGpuTest, DropoutKeepsTheCpuMaskSemanticsAndRepeatsWithTheSeed) {
  PSTRAIN_GPU_OR_SKIP(gpu);
  Shape out_shape;
  const Shape s{4, 16, 16};
  const int64_t n = 16;
  auto layer = MakeLayer("{type: dropout, keep_prob: 0.7}", {s}, &out_shape);
  ASSERT_TRUE(cuda::MirrorOnGpu(layer.get(), gpu).ok());
  std::mt19937_64 data_rng(3);
  Tensor x = RandomTensor(Batched(n, s), &data_rng, 0.5f, 1.5f);  // never zero
  Tensor x_dev = ToDevice(x, gpu), y_dev = gpu->NewTensorOrDie(x.shape(), "y");
  Tensor dx_dev = gpu->NewTensorOrDie(x.shape(), "dx");
  auto run = [&](uint64_t seed, bool training) {
    std::mt19937_64 rng(seed);
    LayerContext ctx{training, &rng, nullptr, gpu, nullptr};
    layer->Forward({&x_dev}, &y_dev, ctx);
    return ToHost(y_dev, gpu);
  };
  Tensor y = run(1, true);
  int64_t kept = 0;
  for (int64_t i = 0; i < x.size(); ++i) {
    if (y[i] != 0.0f) {
      ++kept;
      ASSERT_NEAR(y[i], x[i] / 0.7f, 1e-5f) << "at " << i;
    }
  }
  const double fraction = static_cast<double>(kept) / x.size();
  EXPECT_NEAR(fraction, 0.7, 0.03) << kept << " of " << x.size() << " kept";
  // The backward pass uses the same mask: the gradient flows exactly where the value did.
  Tensor dy = Tensor::Filled(x.shape(), 2.0f);
  Tensor dy_dev = ToDevice(dy, gpu);
  std::mt19937_64 rng(1);
  LayerContext ctx{true, &rng, nullptr, gpu, nullptr};
  layer->Backward({&x_dev}, y_dev, dy_dev, {&dx_dev}, ctx);
  Tensor dx = ToHost(dx_dev, gpu);
  for (int64_t i = 0; i < x.size(); ++i) {
    ASSERT_FLOAT_EQ(dx[i], y[i] != 0.0f ? 2.0f / 0.7f : 0.0f) << "at " << i;
  }
  // Same seed, same mask; another seed, another mask; evaluation is the identity.
  Tensor again = run(1, true);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(again[i], y[i]) << "at " << i;
  Tensor other = run(2, true);
  int64_t differ = 0;
  for (int64_t i = 0; i < x.size(); ++i) differ += (other[i] != 0.0f) != (y[i] != 0.0f);
  EXPECT_GT(differ, x.size() / 10);
  Tensor eval = run(1, false);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(eval[i], x[i]) << "at " << i;
}

}  // namespace
}  // namespace testing
}  // namespace worker
}  // namespace pstrain
