// TensorFlow 1's spellings of flags (common/tf1_flags.h): aliases where pstrain has the flag,
// a refusal naming what to use where it has none, untouched where the tool has neither.
#include "common/tf1_flags.h"

#include <gtest/gtest.h>

#include <set>

namespace pstrain {
namespace {

// The flags of pstrain's server/worker binary, as far as these spellings go.
bool PstrainHas(const std::string& name) {
  static const std::set<std::string> flags = {"gpu_allow_growth", "gpu_memory_fraction",
                                              "train_dir", "update_mode", "config"};
  return flags.count(name) > 0;
}

std::vector<std::string> Translated(std::vector<std::string> args) {
  Status s = TranslateTf1Flags(&args, PstrainHas);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return args;
}

TEST(Tf1FlagsTest, SpellingsWithAPstrainFlagAreTakenAsIt) {
  EXPECT_EQ(Translated({"--allow_growth=false", "--per_process_gpu_memory_fraction=0.3",
                        "-model_dir=/tmp/m", "--config=c.yaml"}),
            (std::vector<std::string>{"--gpu_allow_growth=false", "--gpu_memory_fraction=0.3",
                                      "--train_dir=/tmp/m", "--config=c.yaml"}));
  EXPECT_EQ(Translated({"--noallow_growth"}), std::vector<std::string>{"--nogpu_allow_growth"});
  EXPECT_EQ(Translated({"--sync_replicas"}), std::vector<std::string>{"--update_mode=sync"});
  EXPECT_EQ(Translated({"--sync_replicas=true"}), std::vector<std::string>{"--update_mode=sync"});
  EXPECT_EQ(Translated({"--sync_replicas=0"}), std::vector<std::string>{"--update_mode=async"});
  EXPECT_EQ(Translated({"--nosync_replicas"}), std::vector<std::string>{"--update_mode=async"});
  // After "--" nothing is a flag.
  EXPECT_EQ(Translated({"--", "--model_dir=x"}), (std::vector<std::string>{"--", "--model_dir=x"}));
}

TEST(Tf1FlagsTest, SpellingsWithoutAPstrainFlagStopNamingWhatToUse) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--batch_size=64", "set `batch_size:` under `train:` in the config"},
      {"--learning_rate=0.1", "`learning_rate: {initial: ...}`"},
      {"--intra_op_parallelism_threads=4", "OMP_NUM_THREADS"},
      {"--inter_op_parallelism_threads=2", "no inter-op pool"},
      {"--save_summaries_secs=60", "--log_every_n_steps"},
      {"--num_gpus=2", "CUDA_VISIBLE_DEVICES"},
      {"--replicas_to_aggregate=3", "--backup_workers"},
  };
  for (const auto& [flag, expected] : cases) {
    std::vector<std::string> args = {"--config=c.yaml", flag};
    Status s = TranslateTf1Flags(&args, PstrainHas);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << flag;
    EXPECT_NE(s.message().find(flag.substr(0, flag.find('=')) + " is TensorFlow 1's flag"),
              std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find(expected), std::string::npos) << s.message();
  }
  std::vector<std::string> bad = {"--sync_replicas=maybe"};
  EXPECT_NE(TranslateTf1Flags(&bad, PstrainHas).message().find("expected true or false"),
            std::string::npos);
}

TEST(Tf1FlagsTest, AToolWithoutThePstrainFlagLeavesTheSpellingToGflags) {
  auto keygen_has = [](const std::string& name) { return name == "out_dir"; };
  std::vector<std::string> args = {"--allow_growth"};
  EXPECT_TRUE(TranslateTf1Flags(&args, keygen_has).ok());
  EXPECT_EQ(args, std::vector<std::string>{"--allow_growth"});
  EXPECT_EQ(DescribeTf1Flags(keygen_has), "");
  EXPECT_NE(DescribeTf1Flags(PstrainHas).find("--model_dir (TensorFlow 1): --train_dir"),
            std::string::npos);
}

}  // namespace
}  // namespace pstrain
