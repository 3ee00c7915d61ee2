#include "common/summary/summary_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "common/summary/histogram.h"
#include "tests/summary/event_test_util.h"

namespace pstrain {
namespace {

using nlohmann::json;

std::unique_ptr<SummaryWriter> OpenWriter(const std::string& logdir, const std::string& subdir,
                                          SummaryWriterOptions options = {}) {
  auto writer = SummaryWriter::Open(logdir, subdir, options);
  CHECK(writer.ok()) << writer.status().ToString();
  return std::move(writer).value();
}

// 2 grayscale 2x3 images whose pixels scale to multiples of 51, and one RGB 2x2 image.
Tensor GrayImages() {
  return Tensor::FromVector({2, 1, 2, 3}, {0, 1, 2, 3, 4, 5, 20, 18, 16, 14, 12, 10});
}
Tensor RgbImage() {
  return Tensor::FromVector({1, 3, 2, 2}, {255, 0, 0, 0, /*G*/ 0, 255, 0, 10, /*B*/ 0, 0, 255, 20});
}

TEST(SummaryWriterTest, IndependentDecoderReadsBackEverythingWritten) {
  const ScopedLogdir logdir("decode");
  const std::string text = "**bold** and `code`\n\nline 2: \xc3\xbc";
  const std::vector<float> weights = {-1.5f, 0.25f, 0.0f, 3.0f, 1e-3f};
  const double before =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::string path;
  {
    auto writer = OpenWriter(logdir.path(), "train");
    path = writer->path();
    writer->AddScalar("loss", 0, 0.5f);
    writer->AddScalar("lr", 0, 0.1f);
    writer->AddHistogram("weights", 0, weights.data(), weights.size());
    writer->AddImages("inputs", 0, GrayImages(), 3);
    writer->AddScalar("loss", 10, 1.0f / 3.0f);
    writer->AddImages("rgb", 10, RgbImage(), 1);
    writer->AddText("notes", 10, text);
    writer->AddScalar("loss", -5, -7.25f);  // steps are int64, negative ones included
    ASSERT_TRUE(writer->Close().ok());
  }

  const std::string script = ScriptPath("decode_events.py");
  ASSERT_FALSE(script.empty()) << "PSTRAIN_SOURCE_DIR is not set (ctest sets it)";
  std::string python = TestPythonFromEnv();
  if (python.empty()) python = "python3";
  const CommandResult run = RunPython(python, script, {path});
  ASSERT_EQ(run.exit_code, 0) << "decode_events.py failed on " << path;
  const json records = json::parse(run.out)["records"];
  ASSERT_EQ(records.size(), 9u);

  EXPECT_EQ(records[0]["file_version"], "brain.Event:2");
  EXPECT_GE(records[0]["wall_time"].get<double>(), std::floor(before));
  EXPECT_FALSE(records[0].contains("values"));

  // (step, tag, kind) in the order written, one value per event except the images.
  const std::vector<std::tuple<int64_t, std::vector<std::string>, std::string>> want = {
      {0, {"loss"}, "scalar"},       {0, {"lr"}, "scalar"},
      {0, {"weights"}, "histogram"}, {0, {"inputs/image/0", "inputs/image/1"}, "image"},
      {10, {"loss"}, "scalar"},      {10, {"rgb/image"}, "image"},
      {10, {"notes"}, "tensor"},     {-5, {"loss"}, "scalar"}};
  for (size_t i = 0; i < want.size(); ++i) {
    const json& record = records[i + 1];
    SCOPED_TRACE("record " + std::to_string(i + 1));
    EXPECT_EQ(record["step"].get<int64_t>(), std::get<0>(want[i]));
    EXPECT_GE(record["wall_time"].get<double>(), records[0]["wall_time"].get<double>());
    ASSERT_EQ(record["values"].size(), std::get<1>(want[i]).size());
    for (size_t v = 0; v < std::get<1>(want[i]).size(); ++v) {
      EXPECT_EQ(record["values"][v]["tag"], std::get<1>(want[i])[v]);
      EXPECT_EQ(record["values"][v]["kind"], std::get<2>(want[i]));
    }
  }

  // Scalars: the exact float32 written.
  EXPECT_EQ(records[1]["values"][0]["value"].get<double>(), static_cast<double>(0.5f));
  EXPECT_EQ(records[2]["values"][0]["value"].get<double>(), static_cast<double>(0.1f));
  EXPECT_EQ(records[5]["values"][0]["value"].get<double>(), static_cast<double>(1.0f / 3.0f));
  EXPECT_EQ(records[8]["values"][0]["value"].get<double>(), static_cast<double>(-7.25f));

  // Histogram: statistics of the doubles of the values, buckets as histogram.h computes them.
  const json& histo = records[3]["values"][0];
  double sum = 0, squares = 0;
  for (float w : weights) {
    sum += w;
    squares += static_cast<double>(w) * w;
  }
  EXPECT_EQ(histo["min"].get<double>(), -1.5);
  EXPECT_EQ(histo["max"].get<double>(), 3.0);
  EXPECT_EQ(histo["num"].get<double>(), 5.0);
  EXPECT_EQ(histo["sum"].get<double>(), sum);
  EXPECT_EQ(histo["sum_squares"].get<double>(), squares);
  const Histogram expected = ComputeHistogram(weights.data(), weights.size());
  EXPECT_EQ(histo["bucket_limit"].get<std::vector<double>>(), expected.bucket_limit);
  EXPECT_EQ(histo["bucket"].get<std::vector<double>>(), expected.bucket);

  // Images: min-max scaled per image, grayscale and RGB interleaved from CHW planes.
  const json& gray0 = records[4]["values"][0];
  const json& gray1 = records[4]["values"][1];
  for (const json* image : {&gray0, &gray1}) {
    EXPECT_EQ((*image)["height"], 2);
    EXPECT_EQ((*image)["width"], 3);
    EXPECT_EQ((*image)["colorspace"], 1);
    EXPECT_EQ((*image)["png_height"], 2);
    EXPECT_EQ((*image)["png_width"], 3);
    EXPECT_EQ((*image)["png_channels"], 1);
  }
  EXPECT_EQ(gray0["pixels"].get<std::vector<int>>(), (std::vector<int>{0, 51, 102, 153, 204, 255}));
  EXPECT_EQ(gray1["pixels"].get<std::vector<int>>(), (std::vector<int>{255, 204, 153, 102, 51, 0}));
  const json& rgb = records[6]["values"][0];
  EXPECT_EQ(rgb["colorspace"], 3);
  EXPECT_EQ(rgb["png_channels"], 3);
  EXPECT_EQ(rgb["pixels"].get<std::vector<int>>(),
            (std::vector<int>{255, 0, 0, 0, 255, 0, 0, 0, 255, 0, 10, 20}));

  // Text: a DT_STRING (7) scalar for the text plugin.
  const json& note = records[7]["values"][0];
  EXPECT_EQ(note["plugin_name"], "text");
  EXPECT_EQ(note["dtype"], 7);
  EXPECT_TRUE(note["dims"].empty());
  EXPECT_EQ(note["string_val"], json::array({text}));
}

TEST(SummaryWriterTest, FileIsNamedLikeTensorFlowsInsideTheSubdir) {
  const ScopedLogdir logdir("names");
  auto first = OpenWriter(logdir.path(), "eval/run1");
  auto second = OpenWriter(logdir.path(), "eval/run1");
  const std::filesystem::path path(first->path());
  EXPECT_EQ(path.parent_path(), std::filesystem::path(logdir.path()) / "eval/run1");
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  const std::string name = path.filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  EXPECT_NE(name.find(std::string(".") + host), std::string::npos) << name;
  // A second writer, likely in the same second, gets its own file instead of truncating.
  EXPECT_NE(first->path(), second->path());
  first->AddScalar("a", 1, 1.0f);
  second->AddScalar("b", 1, 2.0f);
  ASSERT_TRUE(first->Close().ok());
  ASSERT_TRUE(second->Close().ok());
  for (const std::string& file : {first->path(), second->path()}) {
    auto events = ReadEvents(file);
    ASSERT_TRUE(events.ok()) << events.status().ToString();
    EXPECT_EQ(events->size(), 2u) << file;
  }
}

TEST(SummaryWriterTest, BackgroundThreadFlushesWithoutExplicitFlush) {
  const ScopedLogdir logdir("timer");
  SummaryWriterOptions options;
  options.flush_secs = 0.1;
  auto writer = OpenWriter(logdir.path(), "", options);
  writer->AddScalar("loss", 7, 1.5f);
  size_t seen = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (seen < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto events = ReadEvents(writer->path());
    if (events.ok()) seen = events->size();
  }
  ASSERT_EQ(seen, 2u) << "the scalar never reached " << writer->path();
  auto events = ReadEvents(writer->path());
  ASSERT_TRUE(events.ok());
  EXPECT_EQ((*events)[1].step(), 7);
  EXPECT_EQ((*events)[1].summary().value(0).simple_value(), 1.5f);
}

TEST(SummaryWriterTest, EventsWaitForFlushSecsOrFlush) {
  const ScopedLogdir logdir("queued");
  SummaryWriterOptions options;
  options.flush_secs = 3600;
  auto writer = OpenWriter(logdir.path(), "", options);
  writer->AddScalar("loss", 1, 1.0f);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto events = ReadEvents(writer->path());
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  EXPECT_EQ(events->size(), 1u) << "only file_version before the first flush";
  ASSERT_TRUE(writer->Flush().ok());
  events = ReadEvents(writer->path());
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  EXPECT_EQ(events->size(), 2u);
}

TEST(SummaryWriterTest, ConcurrentWritersLoseNoEvents) {
  const ScopedLogdir logdir("threads");
  SummaryWriterOptions options;
  options.flush_secs = 0.01;
  options.max_queue = 4;  // the background thread wakes often, racing the adders
  auto writer = OpenWriter(logdir.path(), "", options);
  constexpr int kThreads = 8;
  constexpr int kEvents = 400;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&writer, t] {
      const std::vector<float> values = {1.0f * t, 2.0f, 3.0f};
      for (int step = 0; step < kEvents; ++step) {
        const std::string tag = "thread" + std::to_string(t);
        if (step % 10 == 0) {
          writer->AddHistogram(tag + "/hist", step, values.data(), values.size());
        } else {
          writer->AddScalar(tag, step, static_cast<float>(step * kThreads + t));
        }
        if (step % 50 == 0) {
          EXPECT_TRUE(writer->Flush().ok());
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_TRUE(writer->Close().ok());

  auto events = ReadEvents(writer->path());
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  ASSERT_EQ(events->size(), 1u + kThreads * kEvents);
  std::map<std::string, std::vector<int64_t>> steps;  // per tag, in file order
  for (size_t i = 1; i < events->size(); ++i) {
    const tensorflow::Event& event = (*events)[i];
    ASSERT_EQ(event.summary().value_size(), 1);
    const tensorflow::Summary::Value& value = event.summary().value(0);
    if (value.has_histo()) {
      EXPECT_EQ(value.histo().num(), 3.0);
    } else {
      const int t = std::stoi(value.tag().substr(6));
      EXPECT_EQ(value.simple_value(), static_cast<float>(event.step() * kThreads + t));
    }
    steps[value.tag()].push_back(event.step());
  }
  ASSERT_EQ(steps.size(), 2u * kThreads);
  for (const auto& [tag, tag_steps] : steps) {
    const bool histo = tag.find("/hist") != std::string::npos;
    std::vector<int64_t> want;
    for (int step = 0; step < kEvents; ++step) {
      if ((step % 10 == 0) == histo) want.push_back(step);
    }
    EXPECT_EQ(tag_steps, want) << tag;  // all there, once each, in each thread's order
  }
}

TEST(SummaryWriterTest, ImagesBeyondMaxImagesAreLeftOut) {
  const ScopedLogdir logdir("max_images");
  auto writer = OpenWriter(logdir.path(), "");
  writer->AddImages("batch", 4, Tensor::Filled({5, 1, 2, 2}, 0.5f), 2);
  writer->AddImages("none", 4, Tensor(Shape{0, 1, 2, 2}), 2);
  ASSERT_TRUE(writer->Close().ok());
  auto events = ReadEvents(writer->path());
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  ASSERT_EQ(events->size(), 2u);  // an empty batch writes nothing
  const tensorflow::Summary& summary = (*events)[1].summary();
  ASSERT_EQ(summary.value_size(), 2);
  EXPECT_EQ(summary.value(0).tag(), "batch/image/0");
  EXPECT_EQ(summary.value(1).tag(), "batch/image/1");
}

TEST(SummaryWriterTest, OpenReportsADirectoryItCannotCreate) {
  const ScopedLogdir logdir("blocked");
  const std::string blocker = logdir.path() + "/not_a_dir";
  std::ofstream(blocker) << "x";
  auto writer = SummaryWriter::Open(blocker, "train");
  ASSERT_FALSE(writer.ok());
  EXPECT_NE(writer.status().message().find(blocker), std::string::npos)
      << writer.status().ToString();
}

TEST(SummaryWriterTest, NonPositiveFlushSecsIsRejected) {
  SummaryWriterOptions options;
  options.flush_secs = 0;
  const ScopedLogdir logdir("flush0");
  auto writer = SummaryWriter::Open(logdir.path(), "", options);
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), StatusCode::kInvalidArgument);
}

TEST(SummaryWriterTest, BadImagesAndAddsAfterCloseAreDroppedNotFatal) {
  const ScopedLogdir logdir("dropped");
  auto writer = OpenWriter(logdir.path(), "");
  writer->AddImages("two_channels", 1, Tensor(Shape{1, 2, 4, 4}));
  writer->AddImages("rank3", 1, Tensor(Shape{1, 4, 4}));
  writer->AddImages("empty", 1, Tensor());
  writer->AddHistogram("empty", 1, Tensor());
  ASSERT_TRUE(writer->Close().ok());
  writer->AddScalar("late", 2, 1.0f);
  EXPECT_TRUE(writer->Close().ok());
  auto events = ReadEvents(writer->path());
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  ASSERT_EQ(events->size(), 2u);  // file_version and the empty histogram
  EXPECT_EQ((*events)[1].summary().value(0).histo().num(), 0.0);
}

}  // namespace
}  // namespace pstrain
