// The row types' table and ids (codec_worker.cc writes and reads the rest of their structs).
// The ids are one frame of little-endian int64 after the header, checked whole here: a count the
// frame matches, within the tensor limit, every id >= 0, so a server never buffers or applies a
// row request it would have to refuse half way.
#include <cstring>
#include <memory>

#include "common/wire/codec_body.h"

namespace pstrain {
namespace wire {
namespace codec {
namespace {

static_assert(sizeof(int64_t) == 8, "ids travel as 8 bytes each");

std::string Table(MessageType type) { return StrCat("the ", MessageTypeName(type), "'s table"); }

}  // namespace

Status WriteRows(const std::string& table, const std::vector<int64_t>& ids, MessageType type,
                 schema::RowIds::Builder meta, std::vector<Frame>* frames) {
  if (!ValidName(table)) {
    return InvalidArgument(Table(type) + " is empty or holds a NUL byte");
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0) {
      return InvalidArgument(StrCat("id ", ids[i], " at position ", i, " of the ",
                                    MessageTypeName(type), " is negative (ids are >= 0)"));
    }
  }
  meta.setCount(ids.size());
  auto keep = std::make_shared<const std::vector<int64_t>>(ids);
  frames->push_back({keep->data(), keep->size() * sizeof(int64_t), keep});
  return Status::OK();
}

Status ReadRows(capnp::Text::Reader table, schema::RowIds::Reader meta, Received& r) {
  Message& m = *r.m;
  m.text = TextOf(table);
  if (!ValidName(m.text)) {
    return InvalidArgument(
        StrCat(Table(m.type), " from ", r.sender, " is empty or holds a NUL byte"));
  }
  const uint64_t count = meta.getCount();
  if (count > r.limits.max_tensor_bytes / sizeof(int64_t)) {
    return InvalidArgument(
        StrCat("the ", MessageTypeName(m.type), " from ", r.sender, " lists ", count,
               " ids, more than max_tensor_bytes=", r.limits.max_tensor_bytes, " allows"));
  }
  if (r.frames.size() < 2 || r.frames[1].size != count * sizeof(int64_t)) {
    return DataLoss(StrCat("the ", MessageTypeName(m.type), " from ", r.sender, " lists ", count,
                           " ids (", count * sizeof(int64_t), " bytes) but its ids frame is ",
                           r.frames.size() < 2 ? 0 : r.frames[1].size, " bytes"));
  }
  r.leading_frames = 1;
  m.ids.resize(count);
  // A copy: the frame may sit at any offset of ZeroMQ's buffer, and ids are few next to rows.
  if (count > 0) std::memcpy(m.ids.data(), r.frames[1].data, count * sizeof(int64_t));
  for (size_t i = 0; i < m.ids.size(); ++i) {
    if (m.ids[i] < 0) {
      return InvalidArgument(StrCat("id ", m.ids[i], " at position ", i, " of the ",
                                    MessageTypeName(m.type), " from ", r.sender,
                                    " is negative (ids are >= 0)"));
    }
  }
  return Status::OK();
}

Status CheckRowPush(const std::string& table, size_t ids, const std::vector<NamedTensor>& tensors,
                    const std::string& sender) {
  const int64_t n = static_cast<int64_t>(ids);
  if (tensors.size() != 1) {
    return InvalidArgument(StrCat("a row push from ", sender, " carries ", tensors.size(),
                                  " tensors; expected one, the gradient rows"));
  }
  const NamedTensor& g = tensors[0];
  if (g.name != table) {
    return InvalidArgument(StrCat("a row push from ", sender, " to table '", table,
                                  "' carries tensor '", g.name, "'; expected the table's name"));
  }
  if (g.tensor.shape().rank() != 2 || g.tensor.dim(0) != n || g.tensor.dim(1) <= 0) {
    return InvalidArgument(StrCat("a row push from ", sender, " to table '", table,
                                  "' has gradient ", g.tensor.shape().ToString(), " for ", n,
                                  " ids; expected [", n, ", dimension]"));
  }
  return Status::OK();
}

}  // namespace codec
}  // namespace wire
}  // namespace pstrain
