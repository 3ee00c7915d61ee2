// pstrain-checkpoint: checks and lists checkpoints.
//
//   pstrain-checkpoint verify PATH...   every checkpoint under PATH (a file, a train_dir with its
//                                       ps-*-of-* shard directories, or any directory) is read
//                                       whole and its CRCs checked; exit 1 if any fails
//   pstrain-checkpoint list PATH...     the same, printing each tensor's name and shape
//   pstrain-checkpoint print PATH NAME  one variable's shape, statistics (min, max, mean, NaN
//                                       count, ...) and values (variable_summary.h)
//   pstrain-checkpoint to_tf PATH OUT_DIR [--config=FILE] [--adam_beta1=0.9 --adam_beta2=0.999]
//                                       PATH's model (a cluster train_dir: its newest committed
//                                       step, split variables joined; joined_checkpoint.h) as a
//                                       TensorFlow checkpoint OUT_DIR/model.ckpt-<step>.index +
//                                       .data-00000-of-00001, listed in OUT_DIR/checkpoint, so
//                                       tf.train.latest_checkpoint(OUT_DIR) finds it
//                                       (names and layouts: tf_checkpoint.h); Adam's beta
//                                       powers from --config's train.optimizer, else the flags
//                                       or TensorFlow's defaults
//
// A checkpoint file is one whose name contains ".ckpt-" and that is not a temporary file of an
// interrupted save (".tmp" suffix); the TF-style `checkpoint` index must name existing files.
// Files a server set aside as damaged ("<file>.damaged", out of its index and never restored)
// are listed, not counted as problems. A TensorFlow bundle (model.ckpt-<step>.index and its
// .data files) is verified as one checkpoint. A train_dir's commit record (committed_checkpoints,
// common/checkpoint/cluster_checkpoint.h) must be readable; the newest committed step every
// shard holds is printed as the one a restarted cluster would restore.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/checkpoint_manager.h"
#include "common/checkpoint/cluster_checkpoint.h"
#include "common/checkpoint/joined_checkpoint.h"
#include "common/checkpoint/tf_bundle.h"
#include "common/checkpoint/tf_checkpoint.h"
#include "common/checkpoint/tf_checkpoint_dir.h"
#include "common/checkpoint/variable_summary.h"
#include "worker/training/tf_layout.h"

namespace fs = std::filesystem;

namespace {

bool IsCheckpointFile(const fs::path& p) {
  const std::string name = p.filename().string();
  return name.find(".ckpt-") != std::string::npos && p.extension() != ".tmp" &&
         name.find(".tmp") == std::string::npos && p.extension() != ".index" &&
         name.find(".data-") == std::string::npos;
}

// A TensorFlow bundle's .index stands for the bundle, verified through its prefix.
bool IsBundleIndex(const fs::path& p) {
  return p.filename().string().find(".ckpt-") != std::string::npos && p.extension() == ".index";
}

bool IsSetAside(const fs::path& p) { return p.extension() == ".damaged"; }

// The commit record in `train_dir`, if there is one: false when it is unreadable.
bool CheckCommitRecord(const fs::path& train_dir) {
  if (!fs::exists(pstrain::CommitRecordPath(train_dir.string()))) return true;
  auto committed = pstrain::ReadCommittedSteps(train_dir.string());
  if (!committed.ok()) {
    std::printf("BAD  %s\n", committed.status().ToString().c_str());
    return false;
  }
  // Which steps each ps-<k>-of-<n> shard lists in its index.
  std::vector<std::vector<int64_t>> listed;
  for (const auto& entry : fs::directory_iterator(train_dir)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name.rfind("ps-", 0) != 0) continue;
    std::vector<int64_t> steps;
    auto paths = pstrain::CheckpointManager(entry.path().string(), 0).AllPaths();
    if (paths.ok()) {
      for (const std::string& p : paths.value()) {
        if (auto step = pstrain::StepOfCheckpoint(p)) steps.push_back(*step);
      }
    }
    std::sort(steps.begin(), steps.end());
    listed.push_back(steps);
  }
  auto step = pstrain::NewestRestorableStep(listed, committed.value());
  std::printf("OK   %s: %zu committed step(s); %s\n",
              pstrain::CommitRecordPath(train_dir.string()).c_str(), committed->size(),
              step ? ("a restart restores step " + std::to_string(*step) + " on all " +
                      std::to_string(listed.size()) + " shards")
                         .c_str()
                   : "no committed step is on every shard");
  return true;
}

// Checkpoint files at or under `path`, sorted; the directories holding an index.
void Collect(const fs::path& path, std::vector<fs::path>* files, std::vector<fs::path>* dirs) {
  if (fs::is_regular_file(path) || pstrain::IsTfBundle(path)) {
    files->push_back(path);
    return;
  }
  for (const auto& entry : fs::recursive_directory_iterator(path)) {
    if (entry.is_regular_file() && IsCheckpointFile(entry.path()) && !IsSetAside(entry.path())) {
      files->push_back(entry.path());
    }
    if (entry.is_regular_file() && IsBundleIndex(entry.path())) {
      files->push_back(fs::path(entry.path()).replace_extension());
    }
    if (entry.is_regular_file() && entry.path().filename() == "checkpoint") {
      dirs->push_back(entry.path().parent_path());
    }
  }
  std::sort(files->begin(), files->end());
  std::sort(dirs->begin(), dirs->end());
}

// `to_tf PATH OUT_DIR [--config=FILE] [--adam_beta1=B --adam_beta2=B]`: exit status.
int ToTf(const std::vector<std::string>& args) {
  pstrain::TfCheckpointDirOptions options;  // every bundle kept, as a run's to_tf calls add up
  std::vector<std::string> positional;
  std::string config;
  std::vector<std::pair<double*, std::string>> betas;
  for (const std::string& a : args) {
    if (a.rfind("--config=", 0) == 0) {
      config = a.substr(9);
    } else if (a.rfind("--adam_beta1=", 0) == 0) {
      betas.emplace_back(&options.bundle.adam_beta1, a);
    } else if (a.rfind("--adam_beta2=", 0) == 0) {
      betas.emplace_back(&options.bundle.adam_beta2, a);
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 2) {
    std::fprintf(stderr,
                 "usage: pstrain-checkpoint to_tf PATH OUT_DIR [--config=FILE] "
                 "[--adam_beta1=0.9 --adam_beta2=0.999]\n");
    return 2;
  }
  auto fail = [](const pstrain::Status& st) {
    std::fprintf(stderr, "pstrain-checkpoint to_tf: %s\n", st.ToString().c_str());
    return 1;
  };
  if (!config.empty()) {  // the betas the run trained with; explicit flags win
    auto from_config = pstrain::TfExportOptionsOfConfigFile(config);
    if (!from_config.ok()) return fail(from_config.status());
    options.bundle = from_config.value();
  }
  for (auto& [beta, a] : betas) {
    char* end = nullptr;
    *beta = std::strtod(a.c_str() + 13, &end);
    if (end == a.c_str() + 13 || *end != '\0' || !(*beta > 0 && *beta < 1)) {
      std::fprintf(stderr, "pstrain-checkpoint to_tf: %s: expected a number in (0, 1)\n",
                   a.c_str());
      return 2;
    }
  }
  if (config.empty()) {
    std::fprintf(stderr,
                 "pstrain-checkpoint to_tf: warning: no --config: a dense layer after a flatten "
                 "keeps pstrain's [C, H, W] row order, which a TensorFlow NHWC graph reads as "
                 "[H, W, C]; give the run's --config to convert it\n");
  }
  auto joined = pstrain::ReadJoinedCheckpoint(positional[0]);
  if (!joined.ok()) return fail(joined.status());
  auto prefix = pstrain::SaveTfCheckpointInDir(positional[1], joined->data, options);
  if (!prefix.ok()) return fail(prefix.status());
  std::set<std::string> sources;
  for (const auto& [tensor, files] : joined->files) sources.insert(files.begin(), files.end());
  std::printf(
      "wrote %s (.index, %s) from %zu file(s) at global step %ld: %zu tensors "
      "(Adam's beta1 %g, beta2 %g)\n",
      prefix->c_str(), fs::path(pstrain::BundleDataPath(*prefix, 0, 1)).filename().c_str(),
      sources.size(), static_cast<long>(joined->data.global_step), joined->data.tensors.size(),
      options.bundle.adam_beta1, options.bundle.adam_beta2);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage =
      "usage: pstrain-checkpoint verify|list PATH...\n       pstrain-checkpoint print PATH NAME\n"
      "       pstrain-checkpoint to_tf PATH OUT_DIR [--config=FILE] [--adam_beta1=0.9 "
      "--adam_beta2=0.999]";
  if (argc >= 2 && std::string(argv[1]) == "to_tf") {
    return ToTf(std::vector<std::string>(argv + 2, argv + argc));
  }
  if (argc >= 2 && std::string(argv[1]) == "print") {
    if (argc != 4) {
      std::fprintf(stderr, "%s\n", usage.c_str());
      return 2;
    }
    auto summary = pstrain::SummarizeVariable(argv[2], argv[3]);
    if (!summary.ok()) {
      std::fprintf(stderr, "pstrain-checkpoint print: %s\n", summary.status().ToString().c_str());
      return 1;
    }
    std::printf("%s", pstrain::FormatVariableSummary(summary.value()).c_str());
    return 0;
  }
  if (argc < 3 || (std::string(argv[1]) != "verify" && std::string(argv[1]) != "list")) {
    std::fprintf(stderr, "%s\n", usage.c_str());
    return 2;
  }
  const bool list = std::string(argv[1]) == "list";
  int ok = 0, bad = 0;
  for (int i = 2; i < argc; ++i) {
    if (!fs::exists(argv[i])) {
      std::fprintf(stderr, "%s: no such file or directory\n", argv[i]);
      ++bad;
      continue;
    }
    std::vector<fs::path> files, dirs;
    Collect(argv[i], &files, &dirs);
    if (fs::is_directory(argv[i])) {
      for (const auto& entry : fs::recursive_directory_iterator(argv[i])) {
        if (entry.is_regular_file() && IsSetAside(entry.path())) {
          std::printf("SET ASIDE %s: found damaged by its server; never restored\n",
                      entry.path().c_str());
        }
      }
      if (!CheckCommitRecord(argv[i])) ++bad;
    }
    if (files.empty()) {
      std::fprintf(stderr, "%s: no checkpoint files (named *.ckpt-<step>)\n", argv[i]);
      ++bad;
    }
    for (const fs::path& dir : dirs) {
      pstrain::CheckpointManager manager(dir.string(), 0);
      auto paths = manager.AllPaths();
      if (!paths.ok()) {
        std::printf("BAD  %s/checkpoint: %s\n", dir.c_str(), paths.status().ToString().c_str());
        ++bad;
        continue;
      }
      for (const std::string& p : paths.value()) {
        if (!fs::exists(p) && !pstrain::IsTfBundle(p)) {
          std::printf("BAD  %s/checkpoint names %s, which does not exist\n", dir.c_str(),
                      p.c_str());
          ++bad;
        }
      }
    }
    for (const fs::path& file : files) {
      auto data = pstrain::ReadCheckpointOrTfBundle(file.string());
      if (!data.ok()) {
        std::printf("BAD  %s\n", data.status().ToString().c_str());
        ++bad;
        continue;
      }
      ++ok;
      std::printf("OK   %s: global step %ld, %zu tensors\n", file.c_str(),
                  static_cast<long>(data->global_step), data->tensors.size());
      if (list) {
        for (const auto& [name, t] : data->tensors) {
          std::printf("       %s %s\n", name.c_str(), t.shape().ToString().c_str());
        }
      }
    }
  }
  std::printf("%d checkpoint(s) verified, %d problem(s)\n", ok, bad);
  return bad == 0 ? 0 : 1;
}
