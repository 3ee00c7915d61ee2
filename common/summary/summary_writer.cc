#include "common/summary/summary_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <utility>

#include "common/summary/histogram.h"
#include "common/summary/image_encoding.h"
#include "common/summary/proto/event.pb.h"
#include "common/summary/proto/graph.pb.h"

namespace pstrain {
namespace {

constexpr char kFileVersion[] = "brain.Event:2";

double WallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string Hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

// Creates the file exclusively, so that two writers started in the same second on the same
// host never truncate each other's events.
Result<std::string> CreateEventFile(const std::filesystem::path& dir) {
  const auto secs = static_cast<long long>(WallTime());
  const std::string base =
      (dir / ("events.out.tfevents." + std::to_string(secs) + "." + Hostname())).string();
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const std::string path = attempt == 0 ? base : base + "." + std::to_string(attempt);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::close(fd);
      return path;
    }
    if (errno != EEXIST) {
      return Unavailable("cannot create event file '" + path + "': " + std::strerror(errno));
    }
  }
  return AlreadyExists("event files '" + base + "' .. '.999' all exist");
}

std::string SerializeEvent(int64_t step, tensorflow::Summary summary) {
  tensorflow::Event event;
  event.set_wall_time(WallTime());
  event.set_step(step);
  *event.mutable_summary() = std::move(summary);
  return event.SerializeAsString();
}

}  // namespace

Result<std::unique_ptr<SummaryWriter>> SummaryWriter::Open(const std::string& logdir,
                                                           const std::string& subdir,
                                                           const SummaryWriterOptions& options) {
  if (!(options.flush_secs > 0)) {
    return InvalidArgument("summary flush_secs must be > 0, got " +
                           std::to_string(options.flush_secs));
  }
  const std::filesystem::path dir =
      subdir.empty() ? std::filesystem::path(logdir) : std::filesystem::path(logdir) / subdir;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return Unavailable("cannot create summary directory '" + dir.string() + "': " + ec.message());
  }
  ASSIGN_OR_RETURN(std::string path, CreateEventFile(dir));
  ASSIGN_OR_RETURN(RecordWriter file, RecordWriter::Open(path, /*append=*/true));

  tensorflow::Event version;
  version.set_wall_time(WallTime());
  version.set_file_version(kFileVersion);
  RETURN_IF_ERROR(file.Write(version.SerializeAsString()));
  RETURN_IF_ERROR(file.Flush());
  LOG(INFO) << "Writing TensorBoard summaries to " << path;
  return std::unique_ptr<SummaryWriter>(new SummaryWriter(std::move(file), options));
}

SummaryWriter::SummaryWriter(RecordWriter file, const SummaryWriterOptions& options)
    : path_(file.path()), options_(options), file_(std::move(file)) {
  flusher_ = std::thread([this] { FlushLoop(); });
}

SummaryWriter::~SummaryWriter() { (void)Close(); }

void SummaryWriter::AddScalar(const std::string& tag, int64_t step, float value) {
  tensorflow::Summary summary;
  tensorflow::Summary::Value* v = summary.add_value();
  v->set_tag(tag);
  v->set_simple_value(value);
  Enqueue(SerializeEvent(step, std::move(summary)));
}

void SummaryWriter::AddHistogram(const std::string& tag, int64_t step, const float* values,
                                 int64_t n) {
  const Histogram h = ComputeHistogram(values, n);
  if (h.non_finite > 0) {
    LOG_EVERY_N(WARNING, 100) << "histogram '" << tag << "' at step " << step << ": left out "
                              << h.non_finite << " NaN/Inf of " << n << " values";
  }
  tensorflow::Summary summary;
  tensorflow::Summary::Value* v = summary.add_value();
  v->set_tag(tag);
  tensorflow::HistogramProto* histo = v->mutable_histo();
  histo->set_min(h.min);
  histo->set_max(h.max);
  histo->set_num(h.num);
  histo->set_sum(h.sum);
  histo->set_sum_squares(h.sum_squares);
  histo->mutable_bucket_limit()->Add(h.bucket_limit.begin(), h.bucket_limit.end());
  histo->mutable_bucket()->Add(h.bucket.begin(), h.bucket.end());
  Enqueue(SerializeEvent(step, std::move(summary)));
}

void SummaryWriter::AddHistogram(const std::string& tag, int64_t step, const Tensor& values) {
  // A default-constructed Tensor has a scalar shape but no buffer.
  AddHistogram(tag, step, values.data(), values.empty() ? 0 : values.size());
}

void SummaryWriter::AddImages(const std::string& tag, int64_t step, const Tensor& images,
                              int max_images) {
  const Shape& shape = images.shape();
  if (images.empty() || shape.rank() != 4 || (shape.dim(1) != 1 && shape.dim(1) != 3) ||
      max_images < 1) {
    LOG_EVERY_N(ERROR, 100) << "image summary '" << tag << "' dropped: want [N,C,H,W] with C 1 "
                            << "or 3 and max_images >= 1, got " << shape.ToString()
                            << " and max_images " << max_images;
    return;
  }
  const int64_t count = std::min<int64_t>(shape.dim(0), max_images);
  if (count == 0) return;
  const int channels = static_cast<int>(shape.dim(1));
  const int height = static_cast<int>(shape.dim(2));
  const int width = static_cast<int>(shape.dim(3));
  const int64_t image_size = static_cast<int64_t>(channels) * height * width;
  tensorflow::Summary summary;
  for (int64_t i = 0; i < count; ++i) {
    Result<std::string> png = EncodePng(images.data() + i * image_size, channels, height, width);
    if (!png.ok()) {
      LOG_EVERY_N(ERROR, 100) << "image summary '" << tag
                              << "' dropped: " << png.status().ToString();
      return;
    }
    tensorflow::Summary::Value* v = summary.add_value();
    v->set_tag(max_images == 1 ? tag + "/image" : tag + "/image/" + std::to_string(i));
    tensorflow::Summary::Image* image = v->mutable_image();
    image->set_height(height);
    image->set_width(width);
    image->set_colorspace(channels);
    image->set_encoded_image_string(std::move(png).value());
  }
  Enqueue(SerializeEvent(step, std::move(summary)));
}

void SummaryWriter::AddText(const std::string& tag, int64_t step, const std::string& text) {
  tensorflow::Summary summary;
  tensorflow::Summary::Value* v = summary.add_value();
  v->set_tag(tag);
  // The content is a serialized TextPluginData{version: 0}, which is empty.
  v->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  tensorflow::TensorProto* tensor = v->mutable_tensor();
  tensor->set_dtype(tensorflow::DT_STRING);
  tensor->mutable_tensor_shape();  // no dims: a scalar
  tensor->add_string_val(text);
  Enqueue(SerializeEvent(step, std::move(summary)));
}

void SummaryWriter::AddGraph(const tensorflow::GraphDef& graph) {
  tensorflow::Event event;
  event.set_wall_time(WallTime());
  event.set_graph_def(graph.SerializeAsString());
  Enqueue(event.SerializeAsString());
}

void SummaryWriter::Enqueue(std::string event) {
  std::lock_guard<std::mutex> lock(queue_mu_);
  if (closing_) {
    LOG_FIRST_N(WARNING, 1) << "summary writer for " << path_ << " is closed; dropping events";
    return;
  }
  queue_.push_back(std::move(event));
  if (queue_.size() >= options_.max_queue) wake_.notify_one();
}

void SummaryWriter::WriteQueued() {
  std::lock_guard<std::mutex> file_lock(file_mu_);
  std::vector<std::string> batch;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    batch.swap(queue_);
  }
  if (!write_status_.ok()) return;
  Status status;
  for (const std::string& event : batch) {
    status = file_.Write(event);
    if (!status.ok()) break;
  }
  if (status.ok()) status = file_.Flush();
  if (!status.ok()) {
    // A failed write may leave half a record, which readers stop at; writing more after it
    // would be wasted, so this writer drops everything from here on.
    write_status_ = status;
    LOG(ERROR) << "TensorBoard summaries stop here: " << status.ToString();
  }
}

void SummaryWriter::FlushLoop() {
  const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(options_.flush_secs));
  auto next = std::chrono::steady_clock::now() + interval;
  std::unique_lock<std::mutex> lock(queue_mu_);
  while (!closing_) {
    wake_.wait_until(lock, next, [&] { return closing_ || queue_.size() >= options_.max_queue; });
    if (closing_) break;
    lock.unlock();
    WriteQueued();
    lock.lock();
    const auto now = std::chrono::steady_clock::now();
    if (now >= next) next = now + interval;
  }
}

Status SummaryWriter::Flush() {
  WriteQueued();
  std::lock_guard<std::mutex> file_lock(file_mu_);
  return write_status_;
}

Status SummaryWriter::Close() {
  std::lock_guard<std::mutex> close_lock(close_mu_);
  if (!closed_) {
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      closing_ = true;
    }
    wake_.notify_all();
    if (flusher_.joinable()) flusher_.join();
    WriteQueued();
    std::lock_guard<std::mutex> file_lock(file_mu_);
    Status status = file_.Close();
    if (write_status_.ok() && !status.ok()) {
      write_status_ = status;
      LOG(ERROR) << "closing TensorBoard summaries: " << status.ToString();
    }
    closed_ = true;
  }
  std::lock_guard<std::mutex> file_lock(file_mu_);
  return write_status_;
}

}  // namespace pstrain
