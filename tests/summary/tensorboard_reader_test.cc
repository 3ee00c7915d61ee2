// Reads our event files with TensorBoard's own EventAccumulator: the reader that decides
// whether users see their summaries.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "common/summary/summary_writer.h"
#include "tests/summary/event_test_util.h"

namespace pstrain {
namespace {

using nlohmann::json;

TEST(TensorBoardReaderTest, ReadsScalarsHistogramsImagesAndText) {
  const std::string python = TestPythonFromEnv();
  if (python.empty())
    GTEST_SKIP() << "PSTRAIN_TEST_PYTHON is unset or missing; run "
                    "scripts/test-venv.sh BUILD_DIR to make it";
  const std::string script = ScriptPath("read_with_tensorboard.py");
  ASSERT_FALSE(script.empty()) << "PSTRAIN_SOURCE_DIR is not set (ctest sets it)";

  const ScopedLogdir logdir("tensorboard");
  std::vector<float> weights(1000);
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<float>(i) / 100 - 2;
  const std::string text = "# Run notes\n\n*lr* = 0.1";
  {
    auto opened = SummaryWriter::Open(logdir.path(), "train");
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    std::unique_ptr<SummaryWriter> writer = std::move(opened).value();
    // Steps never go back: the accumulator purges "orphaned" later steps when they do.
    for (int step = 1; step <= 3; ++step) {
      writer->AddScalar("loss", step, 1.0f / step);
      writer->AddHistogram("conv1/weights", step, weights.data(), weights.size());
    }
    // [1,3,2,2]: pixel (0,0) red, (0,1) green, (1,0) blue, (1,1) 20% grey-ish.
    writer->AddImages("inputs", 3,
                      Tensor::FromVector({1, 3, 2, 2}, {1, 0, 0, .2f, 0, 1, 0, .2f, 0, 0, 1, .2f}),
                      2);
    writer->AddText("notes", 3, text);
    ASSERT_TRUE(writer->Close().ok());
  }

  const CommandResult run = RunPython(python, script, {logdir.path() + "/train"});
  if (run.exit_code == 3) GTEST_SKIP() << "tensorboard cannot be imported by " << python;
  ASSERT_EQ(run.exit_code, 0) << "read_with_tensorboard.py failed";
  const json got = json::parse(run.out);

  EXPECT_EQ(got["file_version"], 2.0);  // from "brain.Event:2"

  const json& loss = got["scalars"]["loss"];
  ASSERT_EQ(loss.size(), 3u);
  for (int step = 1; step <= 3; ++step) {
    EXPECT_EQ(loss[step - 1]["step"], step);
    EXPECT_EQ(loss[step - 1]["value"].get<double>(), static_cast<double>(1.0f / step));
  }

  const json& histos = got["histograms"]["conv1/weights"];
  ASSERT_EQ(histos.size(), 3u);
  double sum = 0;
  for (float w : weights) sum += w;
  for (const json& h : histos) {
    EXPECT_EQ(h["min"].get<double>(), -2.0);
    EXPECT_EQ(h["max"].get<double>(), static_cast<double>(weights.back()));
    EXPECT_EQ(h["num"].get<double>(), 1000.0);
    EXPECT_EQ(h["sum"].get<double>(), sum);
    EXPECT_EQ(h["bucket_total"].get<double>(), 1000.0);
  }

  // max_images 2 with one image in the batch: tags are numbered.
  const json& images = got["images"]["inputs/image/0"];
  ASSERT_EQ(images.size(), 1u);
  EXPECT_EQ(images[0]["step"], 3);
  EXPECT_EQ(images[0]["width"], 2);
  EXPECT_EQ(images[0]["height"], 2);
  EXPECT_EQ(images[0]["mode"], "RGB");
  EXPECT_EQ(images[0]["png_size"], json::array({2, 2}));
  EXPECT_EQ(images[0]["pixels"][0], json::array({255, 0, 0}));
  EXPECT_EQ(images[0]["pixels"][1], json::array({0, 255, 0}));
  EXPECT_EQ(images[0]["pixels"][2], json::array({0, 0, 255}));
  EXPECT_EQ(images[0]["pixels"][3], json::array({51, 51, 51}));

  const json& notes = got["tensors"]["notes"];
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0]["step"], 3);
  EXPECT_EQ(notes[0]["plugin_name"], "text");
  EXPECT_EQ(notes[0]["dtype"], 7);  // DT_STRING
  EXPECT_EQ(notes[0]["text"], json::array({text}));

  EXPECT_EQ(got["dashboards"]["scalars"], json::array({"loss"}));
  EXPECT_EQ(got["dashboards"]["histograms"], json::array({"conv1/weights"}));
  EXPECT_EQ(got["dashboards"]["images"], json::array({"inputs/image/0"}));
  EXPECT_EQ(got["dashboards"]["text"], json::array({"notes"}));
}

}  // namespace
}  // namespace pstrain
