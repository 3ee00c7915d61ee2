#include "common/tensor.h"

#include <glog/logging.h>

#include <cstdlib>
#include <cstring>
#include <sstream>

namespace pstrain {

int64_t Shape::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

Shape Shape::WithBatch(int64_t n) const {
  CHECK_GT(rank(), 0);
  std::vector<int64_t> d = dims_;
  d[0] = n;
  return Shape(std::move(d));
}

Shape Shape::WithoutBatch() const {
  CHECK_GT(rank(), 0);
  return Shape(std::vector<int64_t>(dims_.begin() + 1, dims_.end()));
}

std::string Shape::ToString() const {
  std::ostringstream s;
  s << "[";
  for (int i = 0; i < rank(); ++i) s << (i ? "," : "") << dims_[i];
  s << "]";
  return s.str();
}

struct Tensor::Buffer {
  float* data = nullptr;
  std::function<void()> release;
  ~Buffer() {
    if (release) release();
  }
};

namespace {
constexpr size_t kAlignment = 64;

}  // namespace

Tensor Tensor::Uninitialized(Shape shape) {
  Tensor t;
  t.shape_ = std::move(shape);
  const size_t want = static_cast<size_t>(t.shape_.num_elements()) * sizeof(float);
  size_t bytes = (want + kAlignment - 1) / kAlignment * kAlignment;
  if (bytes == 0) bytes = kAlignment;
  void* p = std::aligned_alloc(kAlignment, bytes);
  CHECK(p != nullptr) << "out of host memory allocating " << bytes << " bytes for tensor "
                      << t.shape_.ToString();
  t.buffer_ = std::make_shared<Buffer>();
  t.buffer_->data = static_cast<float*>(p);
  t.buffer_->release = [p] { std::free(p); };
  t.data_ = t.buffer_->data;
  return t;
}

Tensor::Tensor(Shape shape) : Tensor(Uninitialized(std::move(shape))) { SetZero(); }

Tensor Tensor::Filled(Shape shape, float value) {
  Tensor t = Uninitialized(std::move(shape));
  t.Fill(value);
  return t;
}

Tensor Tensor::FromVector(Shape shape, const std::vector<float>& values) {
  CHECK_EQ(shape.num_elements(), static_cast<int64_t>(values.size()))
      << "FromVector: shape " << shape.ToString() << " needs " << shape.num_elements() << " values";
  Tensor t = Uninitialized(std::move(shape));
  std::memcpy(t.data_, values.data(), t.bytes());
  return t;
}

Tensor Tensor::Wrap(Shape shape, float* data, std::function<void()> release) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.buffer_ = std::make_shared<Buffer>();
  t.buffer_->data = data;
  t.buffer_->release = std::move(release);
  t.data_ = data;
  return t;
}

Tensor Tensor::Clone() const {
  if (empty()) return Tensor();
  Tensor t = Uninitialized(shape_);
  std::memcpy(t.data_, data_, bytes());
  return t;
}

Tensor Tensor::Reshaped(Shape shape) const {
  CHECK_EQ(shape.num_elements(), size())
      << "cannot reshape " << shape_.ToString() << " to " << shape.ToString();
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

void Tensor::Fill(float value) {
  const int64_t n = size();
  for (int64_t i = 0; i < n; ++i) data_[i] = value;
}

void Tensor::SetZero() {
  if (data_) std::memset(data_, 0, bytes());
}

void Tensor::CopyFrom(const Tensor& other) {
  CHECK_EQ(size(), other.size()) << "CopyFrom: " << shape_.ToString() << " vs "
                                 << other.shape().ToString();
  if (data_ != other.data_) std::memcpy(data_, other.data_, bytes());
}

std::vector<float> Tensor::ToVector() const { return std::vector<float>(data_, data_ + size()); }

}  // namespace pstrain
