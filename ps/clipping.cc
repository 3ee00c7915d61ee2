#include "ps/clipping.h"

#include <glog/logging.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "ps/parallel.h"

namespace pstrain::ps {
namespace {

bool Absent(const Tensor* t) { return t == nullptr || t->empty(); }

std::string Number(double value) {
  std::ostringstream s;
  s << value;
  return s.str();
}

Status CheckNorm(const char* field, float value) {
  if (value > 0.0f && std::isfinite(value)) return Status::OK();
  return InvalidArgument(std::string("field '") + field + "' must be > 0, got " + Number(value));
}

}  // namespace

void ClipByValue(float min_value, float max_value, Tensor* grad) {
  CHECK(grad != nullptr);
  CHECK_LE(min_value, max_value);
  float* g = grad->data();
  const int64_t n = grad->empty() ? 0 : grad->size();
#pragma omp parallel for simd if (parallel : n >= kMinParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    const float clipped_below = g[i] < min_value ? min_value : g[i];
    g[i] = clipped_below > max_value ? max_value : clipped_below;
  }
}

double SumOfSquares(const Tensor& t) {
  const float* x = t.data();
  const int64_t n = t.empty() ? 0 : t.size();
  double sum = 0.0;
#pragma omp parallel for simd reduction(+ : sum) if (parallel : n >= kMinParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    const double xi = x[i];
    sum += xi * xi;
  }
  return sum;
}

void Scale(float factor, Tensor* t) {
  CHECK(t != nullptr);
  float* x = t->data();
  const int64_t n = t->empty() ? 0 : t->size();
#pragma omp parallel for simd if (parallel : n >= kMinParallelElements)
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

double ClipByNorm(float clip_norm, Tensor* grad) {
  CHECK(grad != nullptr);
  CHECK_GT(clip_norm, 0.0f);
  const double norm = std::sqrt(SumOfSquares(*grad));
  if (norm <= clip_norm) return norm;
  // Same order as TF: (g * clip_norm) / norm.
  const float norm_f = static_cast<float>(norm);
  float* g = grad->data();
  const int64_t n = grad->size();
#pragma omp parallel for simd if (parallel : n >= kMinParallelElements)
  for (int64_t i = 0; i < n; ++i) g[i] = g[i] * clip_norm / norm_f;
  return norm;
}

double GlobalNormScale(double global_norm, double clip_norm) {
  if (!std::isfinite(global_norm)) return std::numeric_limits<double>::quiet_NaN();
  return global_norm > clip_norm ? clip_norm / global_norm : 1.0;
}

double ClipByGlobalNorm(float clip_norm, const std::vector<Tensor*>& grads) {
  CHECK_GT(clip_norm, 0.0f);
  double sum = 0.0;
  for (const Tensor* g : grads) {
    if (!Absent(g)) sum += SumOfSquares(*g);
  }
  const double global_norm = std::sqrt(sum);
  const double scale = GlobalNormScale(global_norm, clip_norm);
  if (scale == 1.0) return global_norm;
  for (Tensor* g : grads) {
    if (!Absent(g)) Scale(static_cast<float>(scale), g);
  }
  return global_norm;
}

Status ClippingOptions::Validate() const {
  if (by_value && !(by_value->first < by_value->second)) {
    return InvalidArgument("field 'by_value' must be [min, max] with min < max, got [" +
                           Number(by_value->first) + ", " + Number(by_value->second) + "]");
  }
  if (by_norm) RETURN_IF_ERROR(CheckNorm("by_norm", *by_norm));
  if (by_global_norm) RETURN_IF_ERROR(CheckNorm("by_global_norm", *by_global_norm));
  return Status::OK();
}

ClippingOptions ClippingOptions::WorkerSide() const {
  ClippingOptions worker;
  worker.by_global_norm = by_global_norm;
  return worker;
}

ClippingOptions ClippingOptions::ServerSide() const {
  ClippingOptions server = *this;
  server.by_global_norm.reset();
  return server;
}

Result<ClippingOptions> ClippingOptions::FromConfig(const ConfigNode& node) {
  RETURN_IF_ERROR(node.CheckKeys({"by_value", "by_norm", "by_global_norm"}));
  ClippingOptions options;
  if (node.Has("by_value")) {
    ASSIGN_OR_RETURN(std::vector<double> range, node.GetDoubleList("by_value"));
    if (range.size() != 2) {
      return node.Error("field 'by_value' must be a list [min, max] of 2 numbers, got " +
                        std::to_string(range.size()) + " entries");
    }
    options.by_value.emplace(static_cast<float>(range[0]), static_cast<float>(range[1]));
  }
  if (node.Has("by_norm")) {
    ASSIGN_OR_RETURN(double norm, node.GetDouble("by_norm"));
    options.by_norm = static_cast<float>(norm);
  }
  if (node.Has("by_global_norm")) {
    ASSIGN_OR_RETURN(double norm, node.GetDouble("by_global_norm"));
    options.by_global_norm = static_cast<float>(norm);
  }
  Status status = options.Validate();
  if (!status.ok()) return node.Error(status.message());
  return options;
}

}  // namespace pstrain::ps
