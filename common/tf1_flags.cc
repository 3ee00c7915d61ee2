#include "common/tf1_flags.h"

namespace pstrain {
namespace {

struct Spelling {
  const char* tf1;
  const char* pstrain;  // the flag it stands for; nullptr: refused with `instead`
  const char* instead;
};

// Each TF-1 spelling: the pstrain flag it stands for, or what to use instead.
const Spelling kSpellings[] = {
    {"allow_growth", "gpu_allow_growth", nullptr},
    {"per_process_gpu_memory_fraction", "gpu_memory_fraction", nullptr},
    {"model_dir", "train_dir", nullptr},
    {"sync_replicas", "update_mode", nullptr},  // true: sync, false: async
    {"replicas_to_aggregate", nullptr,
     "--update_mode=sync averages one push from every worker but --backup_workers per update "
     "(TF-1's replicas_to_aggregate is the workers less --backup_workers); "
     "--update_mode=accumulate --accumulate_n=N averages any N pushes"},
    {"intra_op_parallelism_threads", nullptr,
     "pstrain's ops run on OpenMP threads: set OMP_NUM_THREADS (the launcher sets it per role)"},
    {"inter_op_parallelism_threads", nullptr,
     "pstrain runs a step's ops one after another, each on OpenMP's threads (OMP_NUM_THREADS); "
     "there is no inter-op pool to size"},
    {"save_summaries_secs", nullptr,
     "pstrain writes summaries by step: --log_every_n_steps (scalars) and "
     "--histogram_every_n_steps; the servers' runs every --ps_summary_secs"},
    {"num_gpus", nullptr,
     "a worker uses the GPUs CUDA_VISIBLE_DEVICES shows it (the launcher's cluster file sets "
     "each worker's `gpus:`), with --device=gpu"},
    {"batch_size", nullptr, "set `batch_size:` under `train:` in the config (--config)"},
    {"learning_rate", nullptr,
     "set `learning_rate: {initial: ...}` under `train:` in the config (--config)"},
};

const Spelling* Find(const std::string& name) {
  for (const Spelling& s : kSpellings) {
    if (name == s.tf1) return &s;
  }
  return nullptr;
}

bool IsTrue(const std::string& v) { return v == "true" || v == "1" || v == "yes" || v == "t"; }
bool IsFalse(const std::string& v) { return v == "false" || v == "0" || v == "no" || v == "f"; }

}  // namespace

Status TranslateTf1Flags(std::vector<std::string>* args,
                         const std::function<bool(const std::string&)>& defined) {
  for (size_t i = 0; i < args->size(); ++i) {
    std::string& a = (*args)[i];
    if (a == "--") break;  // gflags stops there too
    if (a.size() < 2 || a[0] != '-') continue;
    const size_t dashes = a[1] == '-' ? 2 : 1;
    const size_t eq = a.find('=');
    std::string name = a.substr(dashes, eq == std::string::npos ? std::string::npos : eq - dashes);
    bool negated = false;
    const Spelling* s = Find(name);
    if (s == nullptr && name.rfind("no", 0) == 0) {  // gflags' --nofoo for a bool
      s = Find(name.substr(2));
      negated = s != nullptr;
    }
    if (s == nullptr || defined(name)) continue;
    if (s->pstrain == nullptr) {
      return InvalidArgument("--" + std::string(s->tf1) +
                             " is TensorFlow 1's flag; pstrain has no flag for it: " + s->instead);
    }
    if (!defined(s->pstrain)) continue;  // this tool has neither: gflags refuses it
    const std::string target = s->pstrain;
    if (target != "update_mode") {
      a = "--" + (negated ? "no" + target : target) + (eq == std::string::npos ? "" : a.substr(eq));
      continue;
    }
    // --sync_replicas[=bool], --nosync_replicas: the update mode.
    std::string value = eq == std::string::npos ? "true" : a.substr(eq + 1);
    if (!IsTrue(value) && !IsFalse(value)) {
      return InvalidArgument("--sync_replicas=" + value + ": expected true or false");
    }
    const bool sync = IsTrue(value) != negated;
    a = std::string("--update_mode=") + (sync ? "sync" : "async");
  }
  return Status::OK();
}

std::string DescribeTf1Flags(const std::function<bool(const std::string&)>& defined) {
  std::string out;
  for (const Spelling& s : kSpellings) {
    if (s.pstrain == nullptr || !defined(s.pstrain)) continue;
    out += "    --" + std::string(s.tf1) + " (TensorFlow 1): --" + s.pstrain +
           (std::string(s.tf1) == "sync_replicas" ? "=sync (false: async)" : "") + "\n";
  }
  return out;
}

}  // namespace pstrain
