// Intra-node sync of CPU workers: an all-reduce (average) of one gradient-sized buffer by
// `ranks` ranks through the host hub over loopback TCP (ranks as threads of one process; the
// transport is the one worker processes use), against the same bytes moved by `ranks` plain
// loopback TCP socket pairs at once (each rank's send and receive, without any averaging): the
// ceiling. Ends with `ratio: X.XX` = hub over raw in GB/s of each rank's sent plus received
// bytes, medians of alternating trials.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "bench/raw_tcp.h"
#include "bench/timing.h"
#include "tools/tool_main.h"
#include "worker/distributed/collectives/host_hub.h"
#include "worker/distributed/collectives/hub_collectives.h"

DEFINE_int32(mib, 16, "floats per rank, in MiB (RefNet's gradients are about 13 MiB)");
DEFINE_int32(ranks, 2, "ranks (workers on the host)");
DEFINE_int32(iters, 10, "all-reduces per trial");
DEFINE_int32(trials, 5, "trials of each; the medians are compared");

namespace pstrain {
namespace {

using bench::Clock;
using bench::SecondsSince;

// GB/s of every rank's sent plus received bytes, all ranks together.
double HubAllReduce(const HostHub& hub, int64_t floats, int iters) {
  std::vector<std::unique_ptr<HubCollectives>> ranks;
  for (int r = 0; r < FLAGS_ranks; ++r) {
    HubCollectivesOptions o;
    o.rank = r;
    o.size = FLAGS_ranks;
    ranks.push_back(HubCollectives::Connect(hub.endpoint(), o).value());
  }
  std::vector<std::thread> threads;
  Clock::time_point start;
  std::vector<std::vector<float>> data(FLAGS_ranks, std::vector<float>(floats, 1.0f));
  auto run = [&](int r, int n) {
    for (int i = 0; i < n; ++i) CHECK(ranks[r]->AllReduceAverage(data[r].data(), floats).ok());
  };
  for (int r = 0; r < FLAGS_ranks; ++r) threads.emplace_back(run, r, 1);  // warm up
  for (auto& t : threads) t.join();
  threads.clear();
  start = Clock::now();
  for (int r = 0; r < FLAGS_ranks; ++r) threads.emplace_back(run, r, iters);
  for (auto& t : threads) t.join();
  const double bytes = static_cast<double>(floats) * sizeof(float);
  return 2.0 * bytes * iters * FLAGS_ranks / SecondsSince(start) / 1e9;
}

// The same bytes through `ranks` raw socket pairs at once.
double RawPairs(size_t bytes, int iters) {
  std::vector<double> rates(FLAGS_ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < FLAGS_ranks; ++r) {
    threads.emplace_back([&, r] { rates[r] = bench::RawTcpPushPull(bytes, iters); });
  }
  for (auto& t : threads) t.join();
  double sum = 0;
  for (double g : rates) sum += g;
  return sum;
}

Status Main() {
  const int64_t floats = (int64_t{FLAGS_mib} << 20) / static_cast<int64_t>(sizeof(float));
  HostHubOptions options;
  options.size = FLAGS_ranks;
  auto hub = HostHub::Start("tcp://127.0.0.1:0", options);
  CHECK(hub.ok()) << hub.status().ToString();
  std::printf("== %d ranks, all-reduce of %d MiB float32 each, %d trials of %d, %u cores\n",
              FLAGS_ranks, FLAGS_mib, FLAGS_trials, FLAGS_iters,
              std::thread::hardware_concurrency());
  const bench::TrialMedians medians = bench::AlternatingTrials(
      FLAGS_trials, "hub all-reduce", [&] { return HubAllReduce(**hub, floats, FLAGS_iters); },
      "raw socket pairs",
      [&] { return RawPairs(static_cast<size_t>(floats) * sizeof(float), FLAGS_iters); });
  const double a = medians.a, b = medians.b;
  std::printf("hub all-reduce (sent + received by every rank): %.2f GB/s (median)\n", a);
  std::printf("raw TCP socket pairs, the same bytes: %.2f GB/s (median)\n", b);
  std::printf("ratio: %.2f\n", a / b);
  return Status::OK();
}

}  // namespace
}  // namespace pstrain

PSTRAIN_TOOL_MAIN(
    "Intra-node sync of CPU workers through the host hub against raw loopback socket "
    "pairs.\nUsage: pstrain-bench-hub-allreduce [--ranks=N ...]",
    pstrain::Main);
