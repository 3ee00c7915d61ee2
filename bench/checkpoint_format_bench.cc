// What TensorFlow's checkpoint format costs beside pstrain's own: for a model config's variables
// with Adam's two slots each (what a server's checkpoint holds), the bytes on disk and the
// median time to write and to read a checkpoint in each format (common/checkpoint/checkpoint.h,
// tf_checkpoint.h), into --dir (a local disk: the times include fsync).
//   pstrain-bench-checkpoint-format --config=configs/refnet.yaml [--repeats=5 --dir=/tmp]
#include <gflags/gflags.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <vector>

#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/tf_bundle.h"
#include "common/checkpoint/tf_checkpoint.h"
#include "common/config.h"
#include "worker/network/model.h"

DEFINE_string(config, "configs/refnet.yaml", "the model config whose variables are saved");
DEFINE_int32(repeats, 5, "saves and reads per format; the median is printed");
DEFINE_string(dir, "/tmp", "where the checkpoints are written (removed at the end)");

namespace fs = std::filesystem;

namespace {

double MedianMs(int repeats, const std::function<pstrain::Status()>& run) {
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    pstrain::Status st = run();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.ToString().c_str());
      std::exit(1);
    }
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  auto model = pstrain::worker::Model::FromConfigFile(FLAGS_config);
  if (!model.ok()) return std::fprintf(stderr, "%s\n", model.status().ToString().c_str()), 1;
  (*model)->InitVariables(1);
  pstrain::CheckpointData data;
  data.global_step = 1000;
  for (pstrain::worker::Variable* v : (*model)->variables()) {
    data.tensors[v->name] = v->value;
    if (!v->trainable) continue;
    data.tensors[v->name + "/m"] = v->value.Clone();
    data.tensors[v->name + "/v"] = v->value.Clone();
  }
  const std::string dir = FLAGS_dir + "/pstrain-checkpoint-format-bench";
  fs::create_directories(dir);
  const std::string ours = dir + "/model.ckpt-1000", theirs = dir + "/tf/model.ckpt-1000";
  fs::create_directories(dir + "/tf");
  const double write_ours = MedianMs(FLAGS_repeats, [&] { return WriteCheckpoint(ours, data); });
  const double write_tf =
      MedianMs(FLAGS_repeats, [&] { return pstrain::WriteTfCheckpoint(theirs, data); });
  const double read_ours =
      MedianMs(FLAGS_repeats, [&] { return pstrain::ReadCheckpoint(ours).status(); });
  const double read_tf =
      MedianMs(FLAGS_repeats, [&] { return pstrain::ReadTfCheckpoint(theirs).status(); });
  const uintmax_t ours_bytes = fs::file_size(ours);
  const uintmax_t tf_bytes = fs::file_size(pstrain::BundleIndexPath(theirs)) +
                             fs::file_size(pstrain::BundleDataPath(theirs, 0, 1));
  std::printf("%s: %zu tensors (variables and Adam slots), median of %d\n", FLAGS_config.c_str(),
              data.tensors.size(), FLAGS_repeats);
  std::printf("  pstrain   %12ju bytes  write %8.1f ms  read %8.1f ms\n", ours_bytes, write_ours,
              read_ours);
  std::printf("  tf bundle %12ju bytes  write %8.1f ms  read %8.1f ms  (index %ju bytes)\n",
              tf_bytes, write_tf, read_tf, fs::file_size(pstrain::BundleIndexPath(theirs)));
  fs::remove_all(dir);
  return 0;
}
