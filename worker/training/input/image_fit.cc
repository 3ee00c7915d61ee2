#include "worker/training/input/image_fit.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace pstrain {
namespace {

// For each output index along one axis: the two source indices and the weight of the second,
// sampling the source span [begin, begin + length) at half-pixel centres.
struct Taps {
  std::vector<int64_t> lo, hi;
  std::vector<float> frac;
};

Taps MakeTaps(int64_t out_size, double begin, double length, int64_t in_size) {
  Taps t;
  t.lo.resize(out_size);
  t.hi.resize(out_size);
  t.frac.resize(out_size);
  const double scale = length / static_cast<double>(out_size);
  for (int64_t i = 0; i < out_size; ++i) {
    const double s = std::clamp(begin + (i + 0.5) * scale - 0.5, 0.0, double(in_size - 1));
    const int64_t lo = static_cast<int64_t>(std::floor(s));
    t.lo[i] = lo;
    t.hi[i] = std::min(lo + 1, in_size - 1);
    t.frac[i] = static_cast<float>(s - lo);
  }
  return t;
}

void Bilinear(const uint8_t* in, const ImageShape& from, const ImageShape& to, double y0, double x0,
              double box_h, double box_w, uint8_t* out) {
  const Taps ys = MakeTaps(to.height, y0, box_h, from.height);
  const Taps xs = MakeTaps(to.width, x0, box_w, from.width);
  const int64_t d = from.depth, in_stride = from.width * d;
  // Separable: blend the two source rows into `row` (a loop the compiler vectorises), then
  // blend along it.
  std::vector<float> row(in_stride);
  for (int64_t y = 0; y < to.height; ++y) {
    const uint8_t* top = in + ys.lo[y] * in_stride;
    const uint8_t* bottom = in + ys.hi[y] * in_stride;
    const float fy = ys.frac[y];
    for (int64_t k = 0; k < in_stride; ++k) {
      row[k] = top[k] + (static_cast<float>(bottom[k]) - top[k]) * fy;
    }
    uint8_t* dst = out + y * to.width * d;
    for (int64_t x = 0; x < to.width; ++x) {
      const float* a = row.data() + xs.lo[x] * d;
      const float* b = row.data() + xs.hi[x] * d;
      const float fx = xs.frac[x];
      for (int64_t c = 0; c < d; ++c) {
        dst[x * d + c] = static_cast<uint8_t>(a[c] + (b[c] - a[c]) * fx + 0.5f);
      }
    }
  }
}

}  // namespace

Result<ResizeMethod> ParseResizeMethod(const std::string& name) {
  if (name == "none") return ResizeMethod::kNone;
  if (name == "bilinear") return ResizeMethod::kBilinear;
  if (name == "center_crop") return ResizeMethod::kCenterCrop;
  return InvalidArgument("resize '" + name + "' is not known (expected none, bilinear or " +
                         "center_crop)");
}

Status FitImage(const uint8_t* pixels, const ImageShape& from, const ImageShape& to,
                ResizeMethod method, const std::string& where, uint8_t* out) {
  if (from.depth != to.depth) {
    return InvalidArgument(where + ": image has " + std::to_string(from.depth) +
                           " channels, the model's input " + std::to_string(to.depth));
  }
  if (from == to) {
    std::memcpy(out, pixels, to.bytes());
    return Status::OK();
  }
  switch (method) {
    case ResizeMethod::kNone:
      return InvalidArgument(where + ": image is " + from.ToString() + ", the model's input is " +
                             to.ToString() +
                             " (set input.resize to bilinear or center_crop to fit it)");
    case ResizeMethod::kBilinear:
      Bilinear(pixels, from, to, 0, 0, from.height, from.width, out);
      return Status::OK();
    case ResizeMethod::kCenterCrop: {
      // The largest box of the target's aspect ratio that fits, centred.
      double box_h = from.height, box_w = from.width;
      if (from.width * to.height > from.height * to.width) {
        box_w = static_cast<double>(from.height) * to.width / to.height;
      } else {
        box_h = static_cast<double>(from.width) * to.height / to.width;
      }
      Bilinear(pixels, from, to, (from.height - box_h) / 2, (from.width - box_w) / 2, box_h, box_w,
               out);
      return Status::OK();
    }
  }
  return Internal("unreachable resize method");
}

}  // namespace pstrain
