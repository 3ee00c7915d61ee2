// Helpers for wire tests: tensors with random bit patterns, raw headers built straight from the
// schema (so tests can make what Encode never would), and a plain ZeroMQ DEALER that sends
// arbitrary frames to a ServerSocket.
#pragma once

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>
#include <zmq.h>

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "common/wire/message.h"
#include "common/wire/pstrain.capnp.h"

namespace pstrain {
namespace wire {

// Random 32-bit patterns, NaN payloads and negative zeros included, so only a bitwise equal
// copy compares equal.
inline Tensor RandomBitsTensor(Shape shape, uint32_t seed) {
  Tensor t = Tensor::Uninitialized(std::move(shape));
  std::mt19937 rng(seed);
  auto* bits = reinterpret_cast<uint32_t*>(t.data());
  for (int64_t i = 0; i < t.size(); ++i) bits[i] = rng();
  return t;
}

inline bool BitwiseEqual(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.bytes() == b.bytes() &&
         (a.bytes() == 0 || std::memcmp(a.data(), b.data(), a.bytes()) == 0);
}

// A header with this build's version and whatever `fill` sets.
inline std::string RawHeader(const std::function<void(schema::Header::Builder)>& fill) {
  capnp::MallocMessageBuilder builder;
  auto header = builder.initRoot<schema::Header>();
  header.setVersion(kProtocolVersion);
  fill(header);
  kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
  return std::string(reinterpret_cast<const char*>(words.begin()), words.size() * 8);
}

// One tensor's metadata in a raw header.
inline void SetMeta(schema::TensorMeta::Builder meta, const std::string& name,
                    const std::vector<int64_t>& dims, uint64_t byte_length) {
  meta.setName(name);
  auto shape = meta.initShape(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) shape.set(i, dims[i]);
  meta.setByteLength(byte_length);
}

class RawDealer {
 public:
  explicit RawDealer(const std::string& endpoint) {
    context_ = zmq_ctx_new();
    socket_ = zmq_socket(context_, ZMQ_DEALER);
    const int linger = 0;
    zmq_setsockopt(socket_, ZMQ_LINGER, &linger, sizeof(linger));
    EXPECT_EQ(zmq_connect(socket_, endpoint.c_str()), 0) << zmq_strerror(zmq_errno());
  }
  ~RawDealer() {
    zmq_close(socket_);
    zmq_ctx_term(context_);
  }
  void Send(const std::vector<std::string>& frames) {
    for (size_t i = 0; i < frames.size(); ++i) {
      const int flags = i + 1 < frames.size() ? ZMQ_SNDMORE : 0;
      ASSERT_GE(zmq_send(socket_, frames[i].data(), frames[i].size(), flags), 0)
          << zmq_strerror(zmq_errno());
    }
  }

 private:
  void* context_ = nullptr;
  void* socket_ = nullptr;
};

}  // namespace wire
}  // namespace pstrain
