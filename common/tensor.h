// The one tensor type: float32, row-major (NCHW for images), 64-byte aligned.
// Copies share the buffer (like tf::Tensor); Clone() makes a deep copy. A tensor can also
// wrap memory it does not own (e.g. a received network frame) with a release callback.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace pstrain {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t dim(int i) const { return dims_.at(i < 0 ? i + rank() : i); }
  const std::vector<int64_t>& dims() const { return dims_; }
  // Product of the dims (1 for a scalar).
  int64_t num_elements() const;
  // The same shape with dim 0 replaced: used to go between per-example and batch shapes.
  Shape WithBatch(int64_t n) const;
  // Per-example shape: all dims but the first.
  Shape WithoutBatch() const;
  // "[128,1,28,28]"
  std::string ToString() const;

  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return dims_ != o.dims_; }

 private:
  std::vector<int64_t> dims_;
};

inline std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.ToString(); }

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled.
  explicit Tensor(Shape shape);
  // Not initialised: for outputs that are fully overwritten.
  static Tensor Uninitialized(Shape shape);
  static Tensor Filled(Shape shape, float value);
  static Tensor FromVector(Shape shape, const std::vector<float>& values);
  // Wraps n floats at `data` without copying; `release` runs when the last copy goes away.
  static Tensor Wrap(Shape shape, float* data, std::function<void()> release);

  const Shape& shape() const { return shape_; }
  // 0 for an empty (default-constructed) tensor.
  int64_t size() const { return buffer_ ? shape_.num_elements() : 0; }
  size_t bytes() const { return static_cast<size_t>(size()) * sizeof(float); }
  bool empty() const { return buffer_ == nullptr; }
  // Whether another Tensor (e.g. one a network send still holds) shares this buffer.
  bool shared() const { return buffer_.use_count() > 1; }
  int64_t dim(int i) const { return shape_.dim(i); }

  float* data() { return data_; }
  const float* data() const { return data_; }
  float& operator[](int64_t i) { return data_[i]; }
  float operator[](int64_t i) const { return data_[i]; }

  Tensor Clone() const;
  // Same buffer, new shape with the same number of elements.
  Tensor Reshaped(Shape shape) const;
  void Fill(float value);
  void SetZero();
  // Copies the values of `other` (same number of elements) into this tensor's buffer.
  void CopyFrom(const Tensor& other);
  std::vector<float> ToVector() const;

 private:
  struct Buffer;
  Shape shape_;
  std::shared_ptr<Buffer> buffer_;
  float* data_ = nullptr;
};

}  // namespace pstrain
