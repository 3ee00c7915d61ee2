// Protocol buffers' wire format by hand, for the two small messages of TensorFlow's tensor bundle
// index (BundleHeaderProto, BundleEntryProto) and the varints of LevelDB's table format, which
// are the same encoding. pstrain_checkpoint links no protobuf library: the TensorBoard protos
// (common/summary/proto) are generated, but a bundle needs six fields, and a reader that checks
// every length against its buffer is shorter than the generated code's setup.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pstrain {
namespace proto_wire {

void PutVarint(std::string* out, uint64_t v);
// Reads a varint at `*in` and advances past it; false when it runs past the end or is longer
// than 10 bytes.
bool GetVarint(std::string_view* in, uint64_t* v);

// Field writers: a varint field (wire type 0), a length-delimited one (2), a fixed32 (5).
void PutVarintField(std::string* out, int field, uint64_t v);
void PutBytesField(std::string* out, int field, std::string_view bytes);
void PutFixed32Field(std::string* out, int field, uint32_t v);

// One field of a message: its number, wire type and value (the varint or fixed value in
// `number`, the bytes of a length-delimited field in `bytes`).
struct Field {
  int field = 0;
  int wire_type = 0;
  uint64_t number = 0;
  std::string_view bytes;
};

// Reads the fields of a message in order. Next() is false at the end and on malformed input;
// ok() tells which.
class FieldReader {
 public:
  explicit FieldReader(std::string_view message) : in_(message) {}
  bool Next(Field* f);
  bool ok() const { return ok_; }

 private:
  std::string_view in_;
  bool ok_ = true;
};

}  // namespace proto_wire
}  // namespace pstrain
