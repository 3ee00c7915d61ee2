#include "common/checkpoint/proto_wire.h"

#include "common/little_endian.h"

namespace pstrain {
namespace proto_wire {
namespace {

void PutTag(std::string* out, int field, int wire_type) {
  PutVarint(out, (static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

}  // namespace

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

bool GetVarint(std::string_view* in, uint64_t* v) {
  uint64_t result = 0;
  for (size_t i = 0; i < in->size() && i < 10; ++i) {
    const uint64_t byte = static_cast<uint8_t>((*in)[i]);
    result |= (byte & 0x7f) << (7 * i);
    if ((byte & 0x80) == 0) {
      *v = result;
      in->remove_prefix(i + 1);
      return true;
    }
  }
  return false;
}

void PutVarintField(std::string* out, int field, uint64_t v) {
  PutTag(out, field, 0);
  PutVarint(out, v);
}

void PutBytesField(std::string* out, int field, std::string_view bytes) {
  PutTag(out, field, 2);
  PutVarint(out, bytes.size());
  out->append(bytes.data(), bytes.size());
}

void PutFixed32Field(std::string* out, int field, uint32_t v) {
  PutTag(out, field, 5);
  char buf[4];
  little_endian::Put32(buf, v);
  out->append(buf, 4);
}

bool FieldReader::Next(Field* f) {
  if (in_.empty() || !ok_) return false;
  uint64_t tag = 0;
  ok_ = GetVarint(&in_, &tag) && (tag >> 3) > 0 && (tag >> 3) < (1u << 29);
  if (!ok_) return false;
  f->field = static_cast<int>(tag >> 3);
  f->wire_type = static_cast<int>(tag & 7);
  f->number = 0;
  f->bytes = {};
  switch (f->wire_type) {
    case 0:
      ok_ = GetVarint(&in_, &f->number);
      break;
    case 1:
    case 5: {
      const size_t n = f->wire_type == 1 ? 8 : 4;
      ok_ = in_.size() >= n;
      if (ok_) {
        f->number = n == 8 ? little_endian::Get64(in_.data()) : little_endian::Get32(in_.data());
        in_.remove_prefix(n);
      }
      break;
    }
    case 2: {
      uint64_t n = 0;
      ok_ = GetVarint(&in_, &n) && n <= in_.size();
      if (ok_) {
        f->bytes = in_.substr(0, n);
        in_.remove_prefix(n);
      }
      break;
    }
    default:  // groups (3, 4) and unknown types: no bundle message has them
      ok_ = false;
  }
  return ok_;
}

}  // namespace proto_wire
}  // namespace pstrain
