// Whole models on the GPU against the CPU: a small residual model with every deterministic
// layer type trained a few SGD steps (losses and variables must stay together), and RefNet's
// gradients for one batch. Skips when no GPU is visible.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/gpu/gpu_test_util.h"
#include "tests/test_env.h"
#include "tests/worker/gradient_checker.h"
#include "worker/network/model.h"

namespace pstrain {
namespace worker {
namespace testing {
namespace {

std::unique_ptr<Model> FromYaml(const std::string& yaml) {
  auto node = ConfigNode::Parse(yaml, "model.yaml");
  EXPECT_TRUE(node.ok()) << node.status().ToString();
  auto model = Model::FromConfig(node.value());
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return std::move(model).value();
}

// Conv and max pooling with asymmetric SAME padding (16 -> 8 -> 4, the odd pixel after),
// average pooling with symmetric padding, batch norm on channels and on features, a residual
// add and dense layers; no dropout (its masks differ between devices by design).
const char* kSmallModel = R"(
input: [1, 16, 16]
layers:
  - {name: conv1, type: conv2d, filters: 4, kernel: 3, stride: 2}
  - {name: bn1, type: batch_norm}
  - {name: relu1, type: relu}
  - {name: conv2, type: conv2d, filters: 4, kernel: 3}
  - {name: add, type: add, inputs: [conv2, relu1]}
  - {name: pool, type: max_pool, size: 3, stride: 2, padding: SAME}
  - {name: avg, type: avg_pool, size: 3, stride: 1, padding: SAME}
  - {name: flatten, type: flatten}
  - {name: fc1, type: fully_connected, units: 16}
  - {name: bn2, type: batch_norm}
  - {name: relu2, type: relu}
  - {name: fc2, type: fully_connected, units: 10}
  - {name: loss, type: softmax_cross_entropy}
)";

void ExpectVariablesClose(Model* gpu_model, Model* cpu_model, float tol, bool grads) {
  auto gv = gpu_model->variables(), cv = cpu_model->variables();
  ASSERT_EQ(gv.size(), cv.size());
  for (size_t i = 0; i < gv.size(); ++i) {
    const Tensor& a = grads ? gv[i]->grad : gv[i]->value;
    const Tensor& b = grads ? cv[i]->grad : cv[i]->value;
    if (grads && !cv[i]->trainable) continue;
    int failures = 0;
    for (int64_t k = 0; k < b.size(); ++k) {
      if (!(std::fabs(a[k] - b[k]) <= tol * std::max(1.0f, std::fabs(b[k]))) && failures++ < 3) {
        ADD_FAILURE() << cv[i]->name << (grads ? " gradient" : "") << "[" << k << "]: GPU " << a[k]
                      << " vs CPU " << b[k];
      }
    }
  }
}

// Plain gradient descent on the host values (the GPU's copies need UploadVariables after).
void DescendOnHost(Model* m, float lr) {
  for (Variable* v : m->trainable_variables()) {
    for (int64_t k = 0; k < v->value.size(); ++k) v->value[k] -= lr * v->grad[k];
  }
}

TEST(ModelGpuTest, SmallModelTrainsTheSameOnGpuAndCpu) {
  PSTRAIN_GPU_OR_SKIP(gpu);
  auto cpu_model = FromYaml(kSmallModel);
  auto gpu_model = FromYaml(kSmallModel);
  cpu_model->InitVariables(5);
  gpu_model->InitVariables(5);
  ASSERT_TRUE(gpu_model->SetDevice(Device::kGpu, gpu).ok());
  std::mt19937_64 data(9);
  for (int step = 0; step < 5; ++step) {
    Tensor x = RandomTensor(Shape{8, 1, 16, 16}, &data);
    std::vector<int32_t> labels;
    for (int i = 0; i < 8; ++i) labels.push_back(static_cast<int32_t>(data() % 10));
    std::mt19937_64 rng_cpu(step), rng_gpu(step);
    const float loss_cpu = cpu_model->Forward(x, labels, true, &rng_cpu);
    const float loss_gpu = gpu_model->Forward(x, labels, true, &rng_gpu);
    EXPECT_NEAR(loss_gpu, loss_cpu, 1e-3f * std::max(1.0f, loss_cpu)) << "step " << step;
    EXPECT_EQ(gpu_model->CountCorrect(labels), cpu_model->CountCorrect(labels));
    cpu_model->Backward();
    // Odd steps copy each layer's gradients while backward goes on, even steps after it.
    if (step % 2 == 1) {
      gpu_model->Backward([&](int layer) { gpu_model->DownloadLayerGradientsAsync(layer); });
    } else {
      gpu_model->Backward();
    }
    gpu_model->DownloadGradients();
    ExpectVariablesClose(gpu_model.get(), cpu_model.get(), 2e-3f, /*grads=*/true);
    DescendOnHost(cpu_model.get(), 0.1f);
    DescendOnHost(gpu_model.get(), 0.1f);
    gpu_model->UploadVariables();
  }
  // Moving statistics came back with the gradients.
  ExpectVariablesClose(gpu_model.get(), cpu_model.get(), 2e-3f, /*grads=*/false);
  // Evaluation mode uses them.
  Tensor x = RandomTensor(Shape{5, 1, 16, 16}, &data);
  const std::vector<int32_t> labels{1, 2, 3, 4, 5};
  EXPECT_NEAR(gpu_model->Forward(x, labels, false, nullptr),
              cpu_model->Forward(x, labels, false, nullptr), 2e-3f);
}

// Batches prefetched while backward runs (Model::PrefetchInput) train as uploaded ones do: the
// same losses and gradients step by step, with an evaluation of another batch size between a
// prefetch and the step that takes it, and a prefetch of a batch that the next step does not
// read (that step uploads its own).
TEST(ModelGpuTest, PrefetchedBatchesTrainAsUploadedOnes) {
  PSTRAIN_GPU_OR_SKIP(gpu);
  auto uploaded = FromYaml(kSmallModel);
  auto prefetched = FromYaml(kSmallModel);
  uploaded->InitVariables(5);
  prefetched->InitVariables(5);
  ASSERT_TRUE(uploaded->SetDevice(Device::kGpu, gpu).ok());
  ASSERT_TRUE(prefetched->SetDevice(Device::kGpu, gpu).ok());
  std::mt19937_64 data(9);
  std::vector<Tensor> batches;
  std::vector<std::vector<int32_t>> labels(7);
  for (int step = 0; step < 7; ++step) {
    batches.push_back(RandomTensor(Shape{8, 1, 16, 16}, &data));
    for (int i = 0; i < 8; ++i) labels[step].push_back(static_cast<int32_t>(data() % 10));
  }
  const Tensor stray = RandomTensor(Shape{8, 1, 16, 16}, &data);
  const Tensor eval = RandomTensor(Shape{3, 1, 16, 16}, &data);
  const std::vector<int32_t> eval_labels{1, 2, 3};
  for (int step = 0; step < 7; ++step) {
    std::mt19937_64 rng_a(step), rng_b(step);
    const float a = uploaded->Forward(batches[step], labels[step], true, &rng_a);
    const float b = prefetched->Forward(batches[step], labels[step], true, &rng_b);
    EXPECT_NEAR(b, a, 1e-5f * std::max(1.0f, a)) << "step " << step;
    uploaded->Backward();
    prefetched->Backward();
    if (step + 1 < 7) {
      // Step 3 prefetches a batch that step 4 does not read.
      prefetched->PrefetchInput(step == 3 ? stray : batches[step + 1], labels[step + 1]);
    }
    uploaded->DownloadGradients();
    prefetched->DownloadGradients();
    ExpectVariablesClose(prefetched.get(), uploaded.get(), 1e-4f, /*grads=*/true);
    for (Model* m : {uploaded.get(), prefetched.get()}) {
      DescendOnHost(m, 0.1f);
      m->UploadVariables();
    }
    if (step == 1) {  // an evaluation between the prefetch and the step that takes it
      EXPECT_NEAR(prefetched->Forward(eval, eval_labels, false, nullptr),
                  uploaded->Forward(eval, eval_labels, false, nullptr), 1e-5f);
    }
  }
}

TEST(ModelGpuTest, RefNetEvaluationMatchesTheCpu) {
  PSTRAIN_GPU_OR_SKIP(gpu);
  auto file = ConfigNode::LoadFile(pstrain::testing::SourceDir() + "/configs/refnet.yaml");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto cpu_model = Model::FromConfig(file->Child("model").value()).value();
  auto gpu_model = Model::FromConfig(file->Child("model").value()).value();
  cpu_model->InitVariables(1);
  gpu_model->InitVariables(1);
  ASSERT_TRUE(gpu_model->SetDevice(Device::kGpu, gpu).ok());
  std::mt19937_64 data(4);
  Tensor x = RandomTensor(Shape{32, 1, 28, 28}, &data);
  std::vector<int32_t> labels;
  for (int i = 0; i < 32; ++i) labels.push_back(i % 10);
  // Evaluation mode: dropout is the identity on both devices, the rest is deterministic.
  const float loss_cpu = cpu_model->Forward(x, labels, false, nullptr);
  const float loss_gpu = gpu_model->Forward(x, labels, false, nullptr);
  EXPECT_NEAR(loss_gpu, loss_cpu, 1e-4f * std::max(1.0f, loss_cpu));
  const Tensor& a = gpu_model->logits();
  const Tensor& b = cpu_model->logits();
  for (int64_t i = 0; i < b.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-3f) << "logit " << i;
}

TEST(ModelGpuTest, RefNetWithoutDropoutGradientsMatchTheCpu) {
  PSTRAIN_GPU_OR_SKIP(gpu);
  // RefNet without its dropout: every gradient must match after one training pass.
  const char* yaml = R"(
input: [1, 28, 28]
layers:
  - {name: conv1, type: conv2d, filters: 32, kernel: 5, padding: SAME}
  - {name: relu1, type: relu}
  - {name: pool1, type: max_pool, size: 2}
  - {name: conv2, type: conv2d, filters: 64, kernel: 5, padding: SAME}
  - {name: relu2, type: relu}
  - {name: pool2, type: max_pool, size: 2}
  - {name: flatten, type: flatten}
  - {name: fc1, type: fully_connected, units: 1024}
  - {name: relu3, type: relu}
  - {name: fc2, type: fully_connected, units: 10}
  - {name: loss, type: softmax_cross_entropy}
)";
  auto cpu_model = FromYaml(yaml);
  auto gpu_model = FromYaml(yaml);
  cpu_model->InitVariables(1);
  gpu_model->InitVariables(1);
  ASSERT_TRUE(gpu_model->SetDevice(Device::kGpu, gpu).ok());
  std::mt19937_64 data(4);
  Tensor x = RandomTensor(Shape{64, 1, 28, 28}, &data);
  std::vector<int32_t> labels;
  for (int i = 0; i < 64; ++i) labels.push_back(i % 10);
  EXPECT_NEAR(gpu_model->Forward(x, labels, true, nullptr),
              cpu_model->Forward(x, labels, true, nullptr), 1e-4f * 3.0f);
  cpu_model->Backward();
  gpu_model->Backward();
  gpu_model->DownloadGradients();
  ExpectVariablesClose(gpu_model.get(), cpu_model.get(), 2e-3f, /*grads=*/true);
}

}  // namespace
}  // namespace testing
}  // namespace worker
}  // namespace pstrain
