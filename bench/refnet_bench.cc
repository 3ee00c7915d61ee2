// Times training steps (forward, backward, optimizer update) of a model config on one fixed
// batch, the way ../shared/bench/torch_refnet.py --bench-steps does for PyTorch: warm-up steps,
// then --repeats timed runs of --steps steps; prints the median images/s. On a GPU the optimizer
// runs on the host (--update=host, a cluster's worker: gradients out, values back) or on the
// device beside the model (--update=device, as pstrain-train on one GPU and as PyTorch).
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common/config.h"
#include "ps/optimizer.h"
#include "tools/device_flags.h"
#include "worker/network/device_update.h"
#include "worker/network/model.h"

DEFINE_string(config, "configs/refnet.yaml", "model config (its `model:` section is used)");
DEFINE_int32(batch, 128, "batch size");
DEFINE_int32(steps, 50, "timed steps per repeat");
DEFINE_int32(warmup, 5, "untimed steps first");
DEFINE_int32(repeats, 3, "timed repeats; the median is reported");
DEFINE_bool(profile, false, "print the time spent in each layer");
DEFINE_int32(breakdown_steps, 0,
             "then time this many steps stage by stage (forward, backward, gradients to the "
             "host, update, variables back), waiting for the device after each stage");
DEFINE_bool(
    relu_after_max_pool, true,
    "run a relu that only a max_pool reads after the pool (Model::set_relu_after_max_pool); "
    "false: in config order, to compare");
DEFINE_string(update, "host",
              "where the optimizer runs on a GPU: host (as a cluster's worker: gradients to the "
              "host, the update there, values back) or device (as pstrain-train on one GPU: "
              "worker/network/device_update.h)");
DEFINE_bool(hand_over_gradients, true,
            "an add hands its output gradient's buffer to an input instead of copying it "
            "(Model::set_hand_over_gradients); false to compare");
DEFINE_bool(prefetch, true,
            "on a GPU, the next step's batch goes to the device while backward runs "
            "(Model::PrefetchInput, as pstrain-train does); false: uploaded when the step starts");
DEFINE_string(optimizer, "{type: momentum, momentum: 0.9}",
              "optimizer config (YAML), as the PyTorch reference's default SGD with momentum");

namespace pstrain {
namespace {

int Run() {
  auto model_or = worker::Model::FromConfigFile(FLAGS_config);
  CHECK(model_or.ok()) << model_or.status().ToString();
  auto& model = model_or.value();
  model->InitVariables(1);
  model->set_relu_after_max_pool(FLAGS_relu_after_max_pool);
  model->set_hand_over_gradients(FLAGS_hand_over_gradients);
  // --device=auto|cpu|gpu and the other TensorFlow-style device flags (tools/device_flags.h).
  auto device = worker::ComputeDevice::Open(worker::DeviceOptionsFromFlags(), "bench");
  CHECK(device.ok()) << device.status().ToString();
  Status placed = device.value()->Place(model.get());
  CHECK(placed.ok()) << placed.ToString();
  auto opt_node = ConfigNode::Parse(FLAGS_optimizer, "--optimizer");
  CHECK(opt_node.ok()) << opt_node.status().ToString();
  auto opt = ps::Optimizer::FromConfig(opt_node.value());
  CHECK(opt.ok()) << opt.status().ToString();

  std::vector<worker::Variable*> vars = model->trainable_variables();
  std::vector<ps::Slots> slots;
  for (auto* v : vars) slots.push_back(opt.value()->CreateSlots(v->value.shape()));
  CHECK(FLAGS_update == "host" || FLAGS_update == "device")
      << "--update=" << FLAGS_update << ": expected host or device";
  int64_t step = 0;
  std::unique_ptr<worker::DeviceUpdate> on_device;
  if (FLAGS_update == "device") {
    CHECK(device.value()->device() == worker::Device::kGpu) << "--update=device needs the GPU";
    std::vector<worker::UpdatedVariable> updated;
    for (size_t i = 0; i < vars.size(); ++i) {
      worker::UpdatedVariable u{vars[i], {}};
      for (const std::string& name : opt.value()->slot_names()) u.slots.push_back(slots[i][name]);
      updated.push_back(std::move(u));
    }
    auto made = worker::NewGpuUpdate(device.value()->gpu(), opt.value()->rule(), std::move(updated),
                                     model->variables());
    CHECK(made.ok()) << made.status().ToString();
    on_device = std::move(made).value();
    model->set_update_on_device(true);
  }
  // The optimizer's update of every variable: on the device, or on the host (the gradients
  // there), at the PyTorch reference's learning rate. A step the device refuses (a non-finite
  // gradient) is counted and reported with the rate, not hidden.
  const float lr = 0.01f;
  int64_t refused = 0;
  auto update = [&] {
    if (on_device) {
      Status s = on_device->Apply(lr, step);
      if (!s.ok() && refused++ == 0) LOG(WARNING) << "step " << step << ": " << s.ToString();
      return;
    }
    for (size_t i = 0; i < vars.size(); ++i) {
      Status s = opt.value()->Apply(lr, step, vars[i]->grad, &vars[i]->value, &slots[i]);
      CHECK(s.ok()) << s.ToString();
    }
  };

  // Values do not change the cost of dense kernels; normal noise like normalised images.
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<int64_t> dims{FLAGS_batch};
  for (int64_t d : model->input_shape().dims()) dims.push_back(d);
  Tensor images = Tensor::Uninitialized(Shape(dims));
  for (int64_t i = 0; i < images.size(); ++i) images[i] = normal(rng);
  std::vector<int32_t> labels(FLAGS_batch);
  for (int i = 0; i < FLAGS_batch; ++i) labels[i] = i % model->num_classes();

  auto train_step = [&] {
    model->Forward(images, labels, true, &rng);
    model->Backward([&](int layer) { model->DownloadLayerGradientsAsync(layer); });
    // The next step's batch (the same host tensor) on its way while backward runs.
    if (FLAGS_prefetch && model->device() == worker::Device::kGpu) {
      model->PrefetchInput(images, labels);
    }
    // On a GPU with --update=host, as a worker does: gradients to the host (each layer's
    // starting while backward goes on), where the update runs (the parameter server's place),
    // and the new values back. With --update=device the model copies nothing.
    model->DownloadGradients();
    update();
    model->UploadVariables();
    ++step;
  };
  std::printf("%s", model->Summary().c_str());
  for (int i = 0; i < FLAGS_warmup; ++i) train_step();
  std::vector<double> rates;
  for (int r = 0; r < FLAGS_repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < FLAGS_steps; ++i) train_step();
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(FLAGS_steps * FLAGS_batch / dt);
    std::printf("pstrain repeat %d: %d steps x batch %d in %.3f s = %.1f img/s (%.2f ms/step)\n", r,
                FLAGS_steps, FLAGS_batch, dt, rates.back(), dt / FLAGS_steps * 1e3);
    std::fflush(stdout);
  }
  if (FLAGS_profile) {
    double update_seconds = 0;
    model->set_profiling(true);
    for (int i = 0; i < FLAGS_steps; ++i) {
      model->Forward(images, labels, true, &rng);
      model->Backward();
      auto t0 = std::chrono::steady_clock::now();
      update();
      model->Synchronize();
      update_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    std::printf("%s%-20s %10.3f\n", model->ProfileReport().c_str(), "optimizer update",
                update_seconds);
  }
  if (FLAGS_breakdown_steps > 0) {
    // Each stage alone, the device drained after it: what a step costs where, without the
    // overlap of gradient copies with backward that the timed steps above have.
    using Clock = std::chrono::steady_clock;
    const char* names[] = {"forward", "backward", "gradients to host",
                           on_device ? "update on device" : "update on host",
                           "variables to device"};
    double sum[5] = {0, 0, 0, 0, 0};
    for (int i = 0; i < FLAGS_breakdown_steps; ++i) {
      auto t = Clock::now();
      auto lap = [&](int stage) {
        model->Synchronize();
        auto now = Clock::now();
        sum[stage] += std::chrono::duration<double>(now - t).count();
        t = now;
      };
      model->Forward(images, labels, true, &rng);
      lap(0);
      model->Backward();
      lap(1);
      model->DownloadGradients();
      lap(2);
      update();
      lap(3);
      model->UploadVariables();
      lap(4);
      ++step;
    }
    double total = 0;
    for (double s : sum) total += s;
    std::printf("step breakdown, ms per step over %d steps, each stage drained:\n",
                FLAGS_breakdown_steps);
    for (int k = 0; k < 5; ++k) {
      std::printf("  %-20s %8.2f  %4.1f%%\n", names[k], sum[k] / FLAGS_breakdown_steps * 1e3,
                  100 * sum[k] / total);
    }
    std::printf("  %-20s %8.2f\n", "sum", total / FLAGS_breakdown_steps * 1e3);
  }
  std::sort(rates.begin(), rates.end());
  std::printf(
      "PSTRAIN_BENCH_TRAIN median %.1f img/s (batch %d, %d steps, %d repeats, update on the %s%s, "
      "%s)\n",
      rates[rates.size() / 2], FLAGS_batch, FLAGS_steps, FLAGS_repeats,
      on_device ? "device" : "host",
      refused > 0
          ? (", " + std::to_string(refused) + " steps refused: non-finite gradients").c_str()
          : "",
      device.value()->Description().c_str());
  const std::string memory = device.value()->MemoryStatsLine();
  if (!memory.empty()) std::printf("%s\n", memory.c_str());
  return 0;
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) {
  gflags::SetUsageMessage("Times training steps of a model on one fixed batch.");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  return pstrain::Run();
}
