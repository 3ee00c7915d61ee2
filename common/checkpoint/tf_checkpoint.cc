#include "common/checkpoint/tf_checkpoint.h"

#include <glog/logging.h>

#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "common/checkpoint/tf_bundle.h"
#include "common/config.h"

namespace pstrain {
namespace {

constexpr char kGlobalStep[] = "global_step";
constexpr char kBeta1Power[] = "beta1_power";
constexpr char kBeta2Power[] = "beta2_power";
constexpr char kFormatKey[] = "format";
constexpr char kTfBundleFormat[] = "tensorflow bundle";

// pstrain's slot name -> TF 1's, for an optimizer; RMSProp's depend on `centered`.
const std::map<std::string, std::string>& SlotNames(bool centered) {
  static const auto* plain = new std::map<std::string, std::string>{
      {"m", "Adam"},     {"v", "Adam_1"},     {"momentum", "Momentum"}, {"accumulator", "Adagrad"},
      {"ms", "RMSProp"}, {"mom", "RMSProp_1"}};
  static const auto* rms_centered = new std::map<std::string, std::string>{
      {"m", "Adam"},     {"v", "Adam_1"},     {"momentum", "Momentum"}, {"accumulator", "Adagrad"},
      {"mg", "RMSProp"}, {"ms", "RMSProp_1"}, {"mom", "RMSProp_2"}};
  return centered ? *rms_centered : *plain;
}

// "a/b/c" -> ("a/b", "c"); false without a '/'.
bool SplitLast(const std::string& name, std::string* base, std::string* last) {
  const size_t at = name.rfind('/');
  if (at == std::string::npos) return false;
  *base = name.substr(0, at);
  *last = name.substr(at + 1);
  return true;
}

// Renames slots of variables present in `names` from one side's names to the other's;
// `centered(base)` says whether that variable's RMSProp is centered, `to_tf` the direction.
template <typename Contains, typename Centered>
std::string MapSlot(const std::string& name, bool to_tf, Contains contains, Centered centered) {
  std::string base, slot;
  if (!SplitLast(name, &base, &slot) || !contains(base)) return name;
  for (const auto& [ours, theirs] : SlotNames(centered(base))) {
    if (slot == (to_tf ? ours : theirs)) return base + "/" + (to_tf ? theirs : ours);
  }
  return name;
}

// out's dim i is in's dim perm[i]; elements in row-major order on both sides.
std::vector<int64_t> Permute(const float* in, const std::vector<int64_t>& dims,
                             const std::vector<int>& perm, float* out) {
  const size_t rank = dims.size();
  std::vector<int64_t> in_strides(rank, 1), out_dims(rank), stride(rank), index(rank, 0);
  for (size_t i = rank; i-- > 1;) in_strides[i - 1] = in_strides[i] * dims[i];
  int64_t n = 1;
  for (size_t i = 0; i < rank; ++i) {
    out_dims[i] = dims[perm[i]];
    stride[i] = in_strides[perm[i]];
    n *= out_dims[i];
  }
  int64_t src = 0;
  for (int64_t o = 0; o < n; ++o) {
    out[o] = in[src];
    for (size_t i = rank; i-- > 0;) {  // the odometer: the last output dim moves fastest
      src += stride[i];
      if (++index[i] < out_dims[i]) break;
      src -= stride[i] * out_dims[i];
      index[i] = 0;
    }
  }
  return out_dims;
}

// pstrain [a, b, h, w] -> TF [h, w, b, a]; [r, c] -> [c, r]; and back.
std::vector<int> Layout(size_t rank, bool to_tf) {
  if (rank == 4) return to_tf ? std::vector<int>{2, 3, 1, 0} : std::vector<int>{3, 2, 0, 1};
  if (rank == 2) return {1, 0};
  std::vector<int> same(rank);
  for (size_t i = 0; i < rank; ++i) same[i] = static_cast<int>(i);
  return same;
}

// The [C, H, W] that `name` (a variable, or one of its slots) reads flattened, or null.
const std::vector<int64_t>* FlattenedInput(const TfLayout& layout, const std::string& name) {
  auto it = layout.flattened_inputs.find(name);
  std::string base, slot;
  if (it == layout.flattened_inputs.end() && SplitLast(name, &base, &slot)) {
    it = layout.flattened_inputs.find(base);
  }
  return it == layout.flattened_inputs.end() ? nullptr : &it->second;
}

// A pstrain tensor in TensorFlow's layout: a dense kernel over a flattened [C, H, W] is
// [units, C, H, W] permuted as a conv kernel to [H, W, C, units], then [H*W*C, units].
BundleTensor ToTf(const Tensor& tensor, const std::vector<int64_t>* flattened) {
  std::vector<int64_t> dims = tensor.shape().dims();
  const bool map_rows = flattened != nullptr && dims.size() == 2 && flattened->size() == 3 &&
                        (*flattened)[0] * (*flattened)[1] * (*flattened)[2] == dims[1];
  if (map_rows) dims = {dims[0], (*flattened)[0], (*flattened)[1], (*flattened)[2]};
  BundleTensor t;
  t.data.resize(tensor.bytes());
  t.shape = Permute(tensor.data(), dims, Layout(dims.size(), /*to_tf=*/true),
                    reinterpret_cast<float*>(t.data.data()));
  if (map_rows) t.shape = {t.shape[0] * t.shape[1] * t.shape[2], t.shape[3]};
  return t;
}

// The inverse of ToTf.
Tensor FromTf(const BundleTensor& t, const std::vector<int64_t>* flattened) {
  std::vector<int64_t> dims = t.shape;
  const bool map_rows = flattened != nullptr && dims.size() == 2 && flattened->size() == 3 &&
                        (*flattened)[0] * (*flattened)[1] * (*flattened)[2] == dims[0];
  if (map_rows) dims = {(*flattened)[1], (*flattened)[2], (*flattened)[0], dims[1]};
  const std::vector<int> perm = Layout(dims.size(), /*to_tf=*/false);
  std::vector<int64_t> ours(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) ours[i] = dims[perm[i]];
  Tensor value = Tensor::Uninitialized(Shape(ours));
  Permute(reinterpret_cast<const float*>(t.data.data()), dims, perm, value.data());
  if (map_rows) value = value.Reshaped(Shape{ours[0], ours[1] * ours[2] * ours[3]});
  return value;
}

BundleTensor Scalar(TfDtype dtype, const void* value) {
  BundleTensor t;
  t.dtype = dtype;
  t.data.assign(static_cast<const char*>(value), dtype == TfDtype::kInt64 ? 8 : 4);
  return t;
}

}  // namespace

Status WriteTfCheckpoint(const std::string& prefix, const CheckpointData& data,
                         const TfExportOptions& options) {
  std::map<std::string, BundleTensor> out;
  auto contains = [&](const std::string& n) { return data.tensors.count(n) > 0; };
  auto centered = [&](const std::string& base) { return contains(base + "/mg"); };
  bool adam = false;
  for (const auto& [name, tensor] : data.tensors) {
    const std::string tf_name = MapSlot(name, /*to_tf=*/true, contains, centered);
    adam |= tf_name.size() > 5 && tf_name.compare(tf_name.size() - 5, 5, "/Adam") == 0;
    BundleTensor t = ToTf(tensor, FlattenedInput(options.layout, name));
    if (!out.emplace(tf_name, std::move(t)).second || tf_name == kGlobalStep) {
      return InvalidArgument(prefix + ": two tensors would both be TensorFlow's '" + tf_name + "'");
    }
  }
  const int64_t step = data.global_step;
  out[kGlobalStep] = Scalar(TfDtype::kInt64, &step);
  if (adam) {
    const float beta1_power = static_cast<float>(std::pow(options.adam_beta1, step + 1.0));
    const float beta2_power = static_cast<float>(std::pow(options.adam_beta2, step + 1.0));
    if (!out.emplace(kBeta1Power, Scalar(TfDtype::kFloat, &beta1_power)).second ||
        !out.emplace(kBeta2Power, Scalar(TfDtype::kFloat, &beta2_power)).second) {
      return InvalidArgument(prefix + ": a variable is named like Adam's beta1_power/beta2_power");
    }
  }
  return WriteTfBundle(prefix, out);
}

Result<CheckpointData> ReadTfCheckpoint(const std::string& prefix, const TfLayout& layout) {
  ASSIGN_OR_RETURN(Bundle bundle, ReadTfBundle(prefix));
  CheckpointData data;
  auto contains = [&](const std::string& n) { return bundle.tensors.count(n) > 0; };
  auto centered = [&](const std::string& base) { return contains(base + "/RMSProp_2"); };
  std::vector<std::string> skipped = bundle.skipped;
  for (auto& [name, t] : bundle.tensors) {
    if (name == kGlobalStep && t.dtype == TfDtype::kInt64 && t.shape.empty()) {
      std::memcpy(&data.global_step, t.data.data(), 8);
      continue;
    }
    if (name == kBeta1Power || name == kBeta2Power) continue;
    if (t.dtype != TfDtype::kFloat) {
      skipped.push_back(name);
      continue;
    }
    const std::string ours = MapSlot(name, /*to_tf=*/false, contains, centered);
    data.tensors[ours] = FromTf(t, FlattenedInput(layout, ours));
  }
  if (!skipped.empty()) {
    LOG(WARNING) << "TensorFlow checkpoint " << prefix << ": " << skipped.size()
                 << " tensor(s) not float32 left out, e.g. '" << skipped[0] << "'";
  }
  data.metadata[kFormatKey] = kTfBundleFormat;
  return data;
}

Result<TfExportOptions> TfExportOptionsFromConfig(const std::string& config_path) {
  TfExportOptions options;
  ASSIGN_OR_RETURN(ConfigNode config, ConfigNode::LoadFile(config_path));
  if (!config.Has("train")) return options;
  ASSIGN_OR_RETURN(ConfigNode train, config.Child("train"));
  if (!train.Has("optimizer")) return options;
  ASSIGN_OR_RETURN(ConfigNode optimizer, train.Child("optimizer"));
  ASSIGN_OR_RETURN(std::string type, optimizer.GetString("type", ""));
  if (type != "adam") return options;
  ASSIGN_OR_RETURN(options.adam_beta1, optimizer.GetDouble("beta1", options.adam_beta1));
  ASSIGN_OR_RETURN(options.adam_beta2, optimizer.GetDouble("beta2", options.adam_beta2));
  for (auto [field, beta] :
       {std::pair{"beta1", options.adam_beta1}, {"beta2", options.adam_beta2}}) {
    if (!(beta > 0 && beta < 1)) {
      return optimizer.Error(std::string(field) + ": expected a number in (0, 1), got " +
                             std::to_string(beta));
    }
  }
  return options;
}

bool IsFromTfBundle(const CheckpointData& data) {
  auto it = data.metadata.find(kFormatKey);
  return it != data.metadata.end() && it->second == kTfBundleFormat;
}

Shape TfShape(const Shape& shape) {
  const std::vector<int> perm = Layout(shape.dims().size(), /*to_tf=*/true);
  std::vector<int64_t> dims(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) dims[i] = shape.dims()[perm[i]];
  return Shape(dims);
}

Result<CheckpointData> ReadCheckpointOrTfBundle(const std::string& path, const TfLayout& layout) {
  if (IsTfBundle(path)) return ReadTfCheckpoint(path, layout);
  return ReadCheckpoint(path);
}

}  // namespace pstrain
