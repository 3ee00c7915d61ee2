// pstrain-scale-sim: ResNet-50's step exchange simulated with SimGrid where this machine cannot
// reach (docs/scaling.md, "Simulated"): first against the cells measured here, then at 64 and
// 512 GPUs. bench/run.sh scale --simulate builds and runs it. SCALE_SIM_VERBOSE=1 adds each
// cell's step and the busiest fraction of each resource; SCALE_SIM_TRACE=1 logs every part sent
// and every reply taken, to stderr.
#include <gflags/gflags.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "bench/scale_sim/constants.h"
#include "bench/scale_sim/model_variables.h"
#include "bench/scale_sim/step_plan.h"
#include "bench/scale_sim/tables.h"

DEFINE_bool(checks, true, "simulate the measured cells and print both");
DEFINE_string(worker_hosts, "8,64", "worker hosts of 8 GPUs, a table each (empty: none)");
DEFINE_string(gbit, "100,25", "link rates, Gbit/s");
DEFINE_string(server_cores, "8,16,32", "cores of a server host");
DEFINE_int32(steps, 30, "steps a worker host runs in each simulation, the first third not counted");
DEFINE_string(modes, "after,overlapped,per_layer",
              "push modes, a column each: after (one push per server after backward), overlapped "
              "(each part once its layers are averaged), per_layer (overlapped, pulls by layer)");
DEFINE_int32(leader_threads, 0,
             "cores of a host leader's client: ZeroMQ's I/O threads and its own (0: pstrain's "
             "--io_threads default for the layout's server processes, plus one: 3 below 6 "
             "processes, 5 from 6 up)");
DEFINE_bool(parts_end_at_layers, false,
            "a part ends at every layer, whatever the pulls (--layer_floor_mb=0)");
DEFINE_double(layer_floor_mb, -1,
              ">= 0: a part ends at a layer once it holds this many MiB, instead of where "
              "pstrain's plan for the pull schedule ends it (worker/distributed/push_parts.h)");
DEFINE_double(push_part_mb, -1,
              "--push_part_mb of the simulated workers (unset: pstrain's default for each "
              "layout's server processes, worker/distributed/push_parts.h ChoosePushSizes)");
DEFINE_double(partition_mb, -1,
              "--partition_bytes of the simulated cluster, in MiB (unset: pstrain's default)");
DEFINE_string(server_hosts_per_8, "1,2,3,4,8",
              "server hosts for every 8 worker hosts (64 worker hosts: 8 times as many)");

namespace {

std::vector<int> Ints(const std::string& list) {
  std::vector<int> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(std::stoi(item));
  }
  return out;
}

void PrintConstants() {
  const scale_sim::Constants k;
  const auto variables = scale_sim::ResNet50Variables();
  const scale_sim::StepPlan plan = scale_sim::PlanStep(variables, 1, 8 << 20, 4 << 20, false);
  int64_t trainable = 0;
  for (const auto& v : variables) trainable += v.trainable ? v.elements() : 0;
  std::printf(
      "model: ResNet-50 (configs/resnet50.yaml), %zu variables, %lld floats (%lld "
      "trainable, the rest batch-norm statistics): %.1f MB a push and a pull\n",
      variables.size(), static_cast<long long>(plan.bytes / 4), static_cast<long long>(trainable),
      plan.bytes / 1e6);
  std::printf(
      "server CPU per byte moved, in or out: %.2f s/GB (bench/scale_model.py, run 3's "
      "cells)\n",
      k.server_s_per_byte * 1e9);
  std::printf("worker CPU per byte pushed or pulled: %.2f s/GB (the same fit)\n",
              k.worker_s_per_byte * 1e9);
  std::printf("a message, answered: %.1f us; a tensor in a push: %.2f us (the transport bench)\n",
              k.message_s * 1e6, k.tensor_s * 1e6);
  std::printf(
      "host average over NVLink: %.0f GB/s bus bandwidth (scale_model.py's, not "
      "measured); link latency %.0f us each way (assumed); %g header bytes a message\n",
      k.nvlink_bytes_per_s / 1e9, k.latency_s * 1e6, k.header_bytes);
  std::printf("one GPU: %.0f ms a step of %d images, %.0f img/s (docs/scaling.md)\n",
              scale_sim::kOneGpuStepSeconds * 1000, scale_sim::kBatch,
              scale_sim::kBatch / scale_sim::kOneGpuStepSeconds);
  std::printf(
      "network: SimGrid's flow model (LV08: TCP's bandwidth factor 0.97), full-duplex "
      "links to a non-blocking switch, one NIC a host\n");
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "simulated ResNet-50 exchange: checks against measured cells, then "
      "clusters of 8-GPU hosts");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  PrintConstants();
  std::vector<scale_sim::PushMode> modes;
  std::stringstream list(FLAGS_modes);
  for (std::string m; std::getline(list, m, ',');) {
    if (m == "after") {
      modes.push_back(scale_sim::PushMode::kAfterBackward);
    } else if (m == "overlapped") {
      modes.push_back(scale_sim::PushMode::kOverlapped);
    } else if (m == "per_layer") {
      modes.push_back(scale_sim::PushMode::kPerLayerPulls);
    } else {
      std::fprintf(stderr, "--modes: '%s' is none of after, overlapped, per_layer\n", m.c_str());
      return 2;
    }
  }
  if (FLAGS_checks) scale_sim::PrintChecks();
  for (int hosts : Ints(FLAGS_worker_hosts)) {
    std::vector<int> servers;
    for (int per8 : Ints(FLAGS_server_hosts_per_8)) servers.push_back((per8 * hosts + 7) / 8);
    for (int gbit : Ints(FLAGS_gbit)) {
      scale_sim::AtScale a;
      a.worker_hosts = hosts;
      a.gbit = gbit;
      a.server_hosts = servers;
      a.cores = Ints(FLAGS_server_cores);
      a.modes = modes;
      a.steps = FLAGS_steps;
      a.leader_threads = FLAGS_leader_threads;
      a.layer_floor_bytes =
          FLAGS_parts_end_at_layers ? 0 : static_cast<int64_t>(FLAGS_layer_floor_mb * 1048576);
      if (FLAGS_push_part_mb > 0) a.part_bytes = static_cast<int64_t>(FLAGS_push_part_mb * 1048576);
      if (FLAGS_partition_mb > 0) {
        a.partition_bytes = static_cast<int64_t>(FLAGS_partition_mb * 1048576);
      }
      scale_sim::PrintAtScale(a);
    }
  }
  return 0;
}
