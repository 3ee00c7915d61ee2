#include "common/checkpoint/checkpoint_index.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/checkpoint/checkpoint_manager.h"
#include "tests/checkpoint/test_util.h"

namespace pstrain {
namespace {

using testing_util::RunAndCapture;
using testing_util::ScriptPath;
using testing_util::SmallModel;
using testing_util::TestPython;

class CheckpointIndexTest : public testing_util::ScratchDirTest {};

TEST(CheckpointIndexFormat, ParsesWhatItFormatsIncludingEscapes) {
  CheckpointState in;
  in.all_model_checkpoint_paths = {"model.ckpt-1", "dir with \"quotes\"/m\\x-2", "ünï\tcode-3"};
  in.model_checkpoint_path = in.all_model_checkpoint_paths.back();
  Result<CheckpointState> out = ParseCheckpointState(FormatCheckpointState(in), "index");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->model_checkpoint_path, in.model_checkpoint_path);
  EXPECT_EQ(out->all_model_checkpoint_paths, in.all_model_checkpoint_paths);
}

TEST(CheckpointIndexFormat, ReadsTensorFlow2IndexWithTimestampsAndAbsolutePaths) {
  const std::string text =
      "model_checkpoint_path: \"/data/run/model.ckpt-300\"\n"
      "all_model_checkpoint_paths: \"/data/run/model.ckpt-200\"\n"
      "all_model_checkpoint_paths: '/data/run/model.ckpt-300'\n"
      "all_model_checkpoint_timestamps: 1700000000.5\n"
      "all_model_checkpoint_timestamps: 1.70000010025e+09\n"
      "last_preserved_timestamp: 1699999999.0\n";
  Result<CheckpointState> state = ParseCheckpointState(text, "index");
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(state->model_checkpoint_path, "/data/run/model.ckpt-300");
  EXPECT_EQ(state->all_model_checkpoint_paths,
            (std::vector<std::string>{"/data/run/model.ckpt-200", "/data/run/model.ckpt-300"}));
}

TEST(CheckpointIndexFormat, GarbageIsDataLossNamingFileAndLine) {
  Result<CheckpointState> state =
      ParseCheckpointState("model_checkpoint_path: \"a\"\nbogus_field: \"x\"\n", "/t/checkpoint");
  ASSERT_EQ(state.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(state.status().message().find("/t/checkpoint:2: unknown field 'bogus_field'"),
            std::string::npos)
      << state.status().message();
  EXPECT_EQ(ParseCheckpointState("", "/t/checkpoint").status().code(), StatusCode::kDataLoss);
}

TEST_F(CheckpointIndexTest, ProtobufTextFormatParsesOurIndexAsCheckpointState) {
  std::string why;
  std::string python = TestPython("google.protobuf", &why);
  if (python.empty()) GTEST_SKIP() << why;
  CheckpointManager manager(dir_, 2);
  for (int step : {100, 200, 300}) ASSERT_TRUE(manager.Save(SmallModel(step)).ok());
  int code = 0;
  std::string out = RunAndCapture("'" + python + "' '" + ScriptPath("checkpoint_index.py") +
                                      "' parse '" + Path("checkpoint") + "'",
                                  &code);
  ASSERT_EQ(code, 0) << out;
  nlohmann::json parsed = nlohmann::json::parse(out);
  EXPECT_EQ(parsed["model_checkpoint_path"], "model.ckpt-300");
  EXPECT_EQ(parsed["all_model_checkpoint_paths"],
            nlohmann::json::array({"model.ckpt-200", "model.ckpt-300"}));
}

TEST_F(CheckpointIndexTest, ManagerReadsIndexWrittenByProtobufTextFormat) {
  std::string why;
  std::string python = TestPython("google.protobuf", &why);
  if (python.empty()) GTEST_SKIP() << why;
  CheckpointManager manager(dir_, 5);
  int code = 0;
  std::string out = RunAndCapture("'" + python + "' '" + ScriptPath("checkpoint_index.py") +
                                      "' write '" + Path("checkpoint") + "'",
                                  &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(manager.LatestPath().value(), Path("model.ckpt-300"));
  EXPECT_EQ(manager.AllPaths().value(),
            (std::vector<std::string>{Path("model.ckpt-200"), Path("model.ckpt-300")}));
}

}  // namespace
}  // namespace pstrain
