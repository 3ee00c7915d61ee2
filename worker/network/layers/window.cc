#include "worker/network/layers/window.h"

#include <algorithm>

#include "worker/network/layer.h"

namespace pstrain {
namespace worker {

Result<Window1D> ComputeWindow(int64_t in, int64_t window, int64_t stride, Padding padding) {
  Window1D w;
  if (padding == Padding::kSame) {
    w.out = (in + stride - 1) / stride;
    int64_t pad = std::max<int64_t>((w.out - 1) * stride + window - in, 0);
    w.pad_before = pad / 2;
    w.pad_after = pad - w.pad_before;
  } else {
    if (window > in) {
      return InvalidArgument("VALID window of " + std::to_string(window) +
                             " does not fit an input of " + std::to_string(in));
    }
    w.out = (in - window + 1 + stride - 1) / stride;
  }
  return w;
}

const char* PaddingName(Padding padding) { return padding == Padding::kSame ? "SAME" : "VALID"; }

Status CheckExplicitPads(const std::string& who, const char* axis, int64_t in, int64_t window,
                         int64_t stride, const Window1D& w) {
  const int64_t onnx = (in + w.pad_before + w.pad_after - window) / stride + 1;
  if (onnx == w.out) return Status::OK();
  return Internal(who + ": the ONNX operator's output " + axis + " would be " +
                  std::to_string(onnx) + ", the layer's is " + std::to_string(w.out));
}

Result<Padding> ReadPadding(const ConfigNode& node, const std::string& key, Padding fallback) {
  if (!node.Has(key)) return fallback;
  ASSIGN_OR_RETURN(std::string p, node.GetString(key));
  std::transform(p.begin(), p.end(), p.begin(), ::toupper);
  if (p == "SAME") return Padding::kSame;
  if (p == "VALID") return Padding::kValid;
  return node.Error("field '" + key + "' must be SAME or VALID, got '" + p + "'");
}

Result<std::vector<int64_t>> ReadPair(const ConfigNode& node, const std::string& key,
                                      int64_t fallback) {
  std::vector<int64_t> v{fallback, fallback};
  if (node.Has(key)) {
    ASSIGN_OR_RETURN(v, node.GetIntList(key));
    if (v.size() == 1) v.push_back(v[0]);
  }
  // Bounded like an example's size, so that window arithmetic cannot overflow.
  if (v.size() != 2 || v[0] < 1 || v[1] < 1 || v[0] > kMaxExampleElements ||
      v[1] > kMaxExampleElements) {
    return node.Error("field '" + key +
                      "' must be a positive integer or [height, width], at most " +
                      std::to_string(kMaxExampleElements));
  }
  return v;
}

}  // namespace worker
}  // namespace pstrain
