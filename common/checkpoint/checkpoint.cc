#include "common/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "common/checkpoint/atomic_file.h"
#include "common/checkpoint/json_text.h"
#include "common/crc32c.h"
#include "common/little_endian.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "checkpoints store raw little-endian floats; a big-endian host needs byte swaps");

namespace pstrain {
namespace {

using json = nlohmann::json;

constexpr char kMagic[8] = {'P', 'S', 'T', 'C', 'K', 'P', 'T', '\0'};
constexpr char kFooterMagic[4] = {'P', 'E', 'N', 'D'};
constexpr uint32_t kVersion = 1;
constexpr uint64_t kPreambleBytes = 24;
constexpr uint64_t kFooterBytes = 16;
constexpr uint64_t kAlignment = 64;
constexpr char kZeros[kAlignment] = {};

uint64_t AlignUp(uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

std::string Hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

// Where one tensor lies in the data section, as the header says.
struct TensorEntry {
  std::string name;
  Shape shape;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

struct ParsedHeader {
  int64_t global_step = 0;
  std::map<std::string, std::string> metadata;
  uint64_t data_bytes = 0;
  std::vector<TensorEntry> tensors;
};

// Checks every field the reader relies on. The layout must be exactly what WriteCheckpoint
// produces, so no field can point outside the data section or make the reader allocate more
// than the file holds.
Status ParseHeader(const std::string& path, const std::string& text, uint64_t max_data_bytes,
                   ParsedHeader* out) {
  auto bad = [&path](const std::string& what) { return DataLoss(path + ": bad header: " + what); };
  json h = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (h.is_discarded() || !h.is_object()) return bad("not a JSON object");
  if (!h.contains("global_step") || !h["global_step"].is_number_integer()) {
    return bad("field 'global_step' is missing or not an integer");
  }
  out->global_step = h["global_step"].get<int64_t>();
  if (!h.contains("metadata") || !h["metadata"].is_object()) {
    return bad("field 'metadata' is missing or not an object");
  }
  for (const auto& [key, value] : h["metadata"].items()) {
    if (!value.is_string()) return bad("metadata '" + key + "' is not a string");
    out->metadata[key] = value.get<std::string>();
  }
  if (!h.contains("data_bytes") || !h["data_bytes"].is_number_unsigned()) {
    return bad("field 'data_bytes' is missing or not a non-negative integer");
  }
  out->data_bytes = h["data_bytes"].get<uint64_t>();
  if (out->data_bytes > max_data_bytes) {
    return DataLoss(path + ": truncated: header says " + std::to_string(out->data_bytes) +
                    " data bytes but the file has room for " + std::to_string(max_data_bytes));
  }
  if (!h.contains("tensors") || !h["tensors"].is_array()) {
    return bad("field 'tensors' is missing or not an array");
  }
  std::set<std::string> seen;
  uint64_t end = 0;
  for (const json& t : h["tensors"]) {
    TensorEntry e;
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) {
      return bad("a tensor entry has no string 'name'");
    }
    e.name = t["name"].get<std::string>();
    if (!seen.insert(e.name).second) return bad("tensor '" + e.name + "' appears twice");
    if (!t.contains("shape") || !t["shape"].is_array()) {
      return bad("tensor '" + e.name + "' has no 'shape' array");
    }
    std::vector<int64_t> dims;
    bool empty = false;  // a zero dim anywhere: no elements, whatever the other dims
    for (const json& d : t["shape"]) {
      if (!d.is_number_unsigned())
        return bad("tensor '" + e.name + "' has a negative or non-integer dim");
      empty |= d.get<uint64_t>() == 0;
    }
    uint64_t elements = empty ? 0 : 1;
    for (const json& d : t["shape"]) {
      const uint64_t dim = d.get<uint64_t>();
      if (!empty && elements > out->data_bytes / dim) {
        return bad("tensor '" + e.name + "' has more elements than the data section holds");
      }
      if (!empty) elements *= dim;
      dims.push_back(static_cast<int64_t>(dim));
    }
    e.shape = Shape(std::move(dims));
    if (!t.contains("offset") || !t["offset"].is_number_unsigned() || !t.contains("bytes") ||
        !t["bytes"].is_number_unsigned()) {
      return bad("tensor '" + e.name + "' has no 'offset' or 'bytes'");
    }
    e.offset = t["offset"].get<uint64_t>();
    e.bytes = t["bytes"].get<uint64_t>();
    if (e.bytes != elements * sizeof(float)) {
      return bad("tensor '" + e.name + "' has " + std::to_string(e.bytes) + " bytes, expected " +
                 std::to_string(elements * sizeof(float)) + " for shape " + e.shape.ToString());
    }
    if (e.offset != AlignUp(end)) {
      return bad("tensor '" + e.name + "' starts at data offset " + std::to_string(e.offset) +
                 ", expected " + std::to_string(AlignUp(end)));
    }
    if (e.bytes > out->data_bytes - std::min(e.offset, out->data_bytes)) {
      return bad("tensor '" + e.name + "' runs past the end of the data section");
    }
    end = e.offset + e.bytes;
    out->tensors.push_back(std::move(e));
  }
  if (out->data_bytes != AlignUp(end)) {
    return bad("" + std::to_string(out->data_bytes) + " data bytes, tensors need " +
               std::to_string(AlignUp(end)));
  }
  return Status::OK();
}

class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

Status WriteCheckpoint(const std::string& path, const CheckpointData& data) {
  json tensors = json::array();
  uint64_t end = 0;
  for (const auto& [name, tensor] : data.tensors) {
    if (tensor.empty()) {
      return InvalidArgument("checkpoint '" + path + "': tensor '" + name + "' has no buffer");
    }
    uint64_t offset = AlignUp(end);
    tensors.push_back({{"name", name},
                       {"shape", tensor.shape().dims()},
                       {"offset", offset},
                       {"bytes", static_cast<uint64_t>(tensor.bytes())}});
    end = offset + tensor.bytes();
  }
  json h = {{"global_step", data.global_step},
            {"metadata", data.metadata},
            {"data_bytes", AlignUp(end)},
            {"tensors", std::move(tensors)}};
  ASSIGN_OR_RETURN(const std::string header, JsonText(h, "checkpoint '" + path + "'"));

  char preamble[kPreambleBytes];
  std::memcpy(preamble, kMagic, 8);
  little_endian::Put32(preamble + 8, kVersion);
  little_endian::Put32(preamble + 12, crc32c::Mask(crc32c::Value(header.data(), header.size())));
  little_endian::Put64(preamble + 16, header.size());
  const uint64_t header_end = kPreambleBytes + header.size();

  ASSIGN_OR_RETURN(AtomicFileWriter writer, AtomicFileWriter::Create(path));
  uint32_t crc = 0;
  uint64_t written = 0;
  auto append = [&](const void* p, size_t n) {
    crc = crc32c::Extend(crc, p, n);
    written += n;
    return writer.Append(p, n);
  };
  RETURN_IF_ERROR(append(preamble, kPreambleBytes));
  RETURN_IF_ERROR(append(header.data(), header.size()));
  RETURN_IF_ERROR(append(kZeros, AlignUp(header_end) - header_end));
  const uint64_t data_start = written;
  for (const auto& entry : data.tensors) {
    const Tensor& tensor = entry.second;
    RETURN_IF_ERROR(append(kZeros, AlignUp(written - data_start) - (written - data_start)));
    RETURN_IF_ERROR(append(tensor.data(), tensor.bytes()));
  }
  RETURN_IF_ERROR(append(kZeros, AlignUp(written - data_start) - (written - data_start)));

  char footer[kFooterBytes];
  little_endian::Put64(footer, written);
  little_endian::Put32(footer + 8, crc32c::Mask(crc));
  std::memcpy(footer + 12, kFooterMagic, 4);
  RETURN_IF_ERROR(writer.Append(footer, kFooterBytes));
  return writer.Commit();
}

Result<CheckpointData> ReadCheckpoint(const std::string& path) {
  ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return NotFound("checkpoint '" + path + "' does not exist");
    return Unavailable("cannot open checkpoint '" + path + "': " + std::strerror(errno));
  }
  auto loss = [&path](const std::string& what) { return DataLoss(path + ": " + what); };
  struct stat st;
  if (fstat(fd.get(), &st) != 0) {
    return Unavailable("cannot stat checkpoint '" + path + "': " + std::strerror(errno));
  }
  const uint64_t file_bytes = static_cast<uint64_t>(st.st_size);
  if (file_bytes < kPreambleBytes + kFooterBytes) {
    return loss("truncated: file is " + std::to_string(file_bytes) + " bytes, smaller than the " +
                std::to_string(kPreambleBytes + kFooterBytes) + "-byte preamble and footer");
  }
  char preamble[kPreambleBytes];
  if (!ReadFull(fd.get(), preamble, kPreambleBytes)) return loss("cannot read the preamble");
  if (std::memcmp(preamble, kMagic, 8) != 0) {
    return loss("bad magic (not a pstrain checkpoint; expected \"PSTCKPT\")");
  }
  uint32_t version = little_endian::Get32(preamble + 8);
  if (version != kVersion) {
    return loss("unsupported version " + std::to_string(version) + " (expected " +
                std::to_string(kVersion) + ")");
  }
  const uint64_t header_bytes = little_endian::Get64(preamble + 16);
  if (header_bytes > file_bytes - kPreambleBytes - kFooterBytes) {
    return loss("truncated: header of " + std::to_string(header_bytes) +
                " bytes does not fit in a file of " + std::to_string(file_bytes) + " bytes");
  }
  std::string header(header_bytes, '\0');
  if (!ReadFull(fd.get(), header.data(), header_bytes)) return loss("cannot read the header");
  uint32_t stored_header_crc = crc32c::Unmask(little_endian::Get32(preamble + 12));
  uint32_t header_crc = crc32c::Value(header.data(), header.size());
  if (stored_header_crc != header_crc) {
    return loss("header checksum mismatch (stored " + Hex(stored_header_crc) + ", computed " +
                Hex(header_crc) + ")");
  }
  const uint64_t data_start = AlignUp(kPreambleBytes + header_bytes);
  const uint64_t room =
      file_bytes >= data_start + kFooterBytes ? file_bytes - data_start - kFooterBytes : 0;
  ParsedHeader parsed;
  RETURN_IF_ERROR(ParseHeader(path, header, room, &parsed));
  const uint64_t expected_bytes = data_start + parsed.data_bytes + kFooterBytes;
  if (file_bytes != expected_bytes) {
    return loss((file_bytes < expected_bytes ? "truncated: file is " : "file is ") +
                std::to_string(file_bytes) + " bytes, header expects " +
                std::to_string(expected_bytes));
  }

  uint32_t crc =
      crc32c::Extend(crc32c::Value(preamble, kPreambleBytes), header.data(), header.size());
  char pad[kAlignment];
  auto read_padding = [&](uint64_t n) {
    if (!ReadFull(fd.get(), pad, n)) return false;
    crc = crc32c::Extend(crc, pad, n);
    return true;
  };
  if (!read_padding(data_start - kPreambleBytes - header_bytes)) {
    return loss("cannot read the header padding");
  }
  CheckpointData out;
  uint64_t pos = 0;
  for (const TensorEntry& e : parsed.tensors) {
    if (!read_padding(e.offset - pos)) return loss("cannot read padding before '" + e.name + "'");
    Tensor t = Tensor::Uninitialized(e.shape);
    if (!ReadFull(fd.get(), t.data(), e.bytes)) return loss("cannot read tensor '" + e.name + "'");
    crc = crc32c::Extend(crc, t.data(), e.bytes);
    pos = e.offset + e.bytes;
    out.tensors.emplace(e.name, std::move(t));
  }
  if (!read_padding(parsed.data_bytes - pos)) return loss("cannot read the final padding");

  char footer[kFooterBytes];
  if (!ReadFull(fd.get(), footer, kFooterBytes)) return loss("cannot read the footer");
  if (std::memcmp(footer + 12, kFooterMagic, 4) != 0) return loss("bad footer magic");
  if (little_endian::Get64(footer) != data_start + parsed.data_bytes) {
    return loss("footer says " + std::to_string(little_endian::Get64(footer)) +
                " bytes precede it, expected " + std::to_string(data_start + parsed.data_bytes));
  }
  uint32_t stored_crc = crc32c::Unmask(little_endian::Get32(footer + 8));
  if (stored_crc != crc) {
    return loss("checksum mismatch (stored " + Hex(stored_crc) + ", computed " + Hex(crc) + ")");
  }
  out.global_step = parsed.global_step;
  out.metadata = std::move(parsed.metadata);
  return out;
}

}  // namespace pstrain
