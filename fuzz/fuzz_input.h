// Reads typed values off the front of a fuzz input. Past the end every read gives zero or an
// empty string, so a target never reads outside the input and a short input is still a valid
// (short) test. A small stand-in for libFuzzer's FuzzedDataProvider, which the gcc build lacks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace pstrain {
namespace fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return pos_ >= size_; }
  size_t remaining() const { return size_ - pos_; }

  uint8_t Byte() { return empty() ? 0 : data_[pos_++]; }
  bool Bool() { return Byte() & 1; }

  // Raw little-endian bytes, so every bit pattern (huge, negative, NaN) is reachable.
  template <typename T>
  T Raw() {
    T v{};
    const size_t n = std::min(sizeof(T), remaining());
    std::memcpy(&v, data_ + pos_, n);
    pos_ += n;
    return v;
  }

  // A value in [lo, hi] from one byte (ranges here are small).
  int64_t Range(int64_t lo, int64_t hi) { return lo + Byte() % (hi - lo + 1); }

  template <typename T>
  T Pick(const std::vector<T>& options) {
    return options[Byte() % options.size()];
  }

  // Up to `n` bytes (fewer at the end of the input).
  std::string Bytes(size_t n) {
    n = std::min(n, remaining());
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }

  // A 16-bit little-endian length, then that many bytes (fewer at the end of the input).
  std::string LengthPrefixed() { return Bytes(Raw<uint16_t>()); }

  std::string Rest() { return Bytes(remaining()); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace fuzz
}  // namespace pstrain
