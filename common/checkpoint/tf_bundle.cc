#include "common/checkpoint/tf_bundle.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/checkpoint/atomic_file.h"
#include "common/checkpoint/proto_wire.h"
#include "common/checkpoint/sstable.h"
#include "common/crc32c.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "bundles are written LITTLE-endian from the host's bytes");

namespace pstrain {
namespace {

using proto_wire::Field;
using proto_wire::FieldReader;

// Field numbers of tensor_bundle.proto, tensor_shape.proto and versions.proto.
enum HeaderField { kNumShards = 1, kEndianness = 2, kVersion = 3 };
enum VersionField { kProducer = 1 };
enum EntryField { kDtype = 1, kShape = 2, kShardId = 3, kOffset = 4, kSize = 5, kCrc = 6 };
enum ShapeField { kDim = 2, kUnknownRank = 3 };
enum DimField { kDimSize = 1 };
constexpr int kSlices = 7;

size_t ElementBytes(TfDtype dtype) { return dtype == TfDtype::kInt64 ? 8 : 4; }

bool IsReadable(uint64_t dtype) {
  return dtype == static_cast<uint64_t>(TfDtype::kFloat) ||
         dtype == static_cast<uint64_t>(TfDtype::kInt64);
}

std::string EncodeHeader() {
  std::string version, header;
  proto_wire::PutVarintField(&version, kProducer, 1);
  proto_wire::PutVarintField(&header, kNumShards, 1);
  // endianness LITTLE is 0, protobuf's default, which the encoding leaves out
  proto_wire::PutBytesField(&header, kVersion, version);
  return header;
}

std::string EncodeEntry(const BundleTensor& t, uint64_t offset, uint32_t crc) {
  std::string shape, entry;
  for (int64_t d : t.shape) {
    std::string dim;
    proto_wire::PutVarintField(&dim, kDimSize, static_cast<uint64_t>(d));
    proto_wire::PutBytesField(&shape, kDim, dim);
  }
  proto_wire::PutVarintField(&entry, kDtype, static_cast<uint64_t>(t.dtype));
  proto_wire::PutBytesField(&entry, kShape, shape);
  // shard_id 0: left out as protobuf leaves defaults out
  if (offset != 0) proto_wire::PutVarintField(&entry, kOffset, offset);
  if (!t.data.empty()) proto_wire::PutVarintField(&entry, kSize, t.data.size());
  proto_wire::PutFixed32Field(&entry, kCrc, crc32c::Mask(crc));
  return entry;
}

struct Entry {
  uint64_t dtype = 0;
  std::vector<int64_t> shape;
  int shard = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t masked_crc = 0;
};

Status ParseEntry(const std::string& index, const std::string& name, std::string_view bytes,
                  Entry* e) {
  auto bad = [&](const std::string& what) {
    return DataLoss(index + ": entry of tensor '" + name + "': " + what);
  };
  FieldReader fields(bytes);
  Field f;
  while (fields.Next(&f)) {
    if (f.field == kSlices) {
      return InvalidArgument(index + ": tensor '" + name +
                             "' is saved in slices (a partitioned variable); pstrain reads whole "
                             "tensors only");
    }
    if (f.field == kShape && f.wire_type == 2) {
      FieldReader dims(f.bytes);
      Field d;
      while (dims.Next(&d)) {
        if (d.field == kUnknownRank && d.number != 0) return bad("shape of unknown rank");
        if (d.field != kDim || d.wire_type != 2) continue;
        FieldReader dim(d.bytes);
        Field s;
        int64_t size = 0;
        while (dim.Next(&s)) {
          if (s.field == kDimSize && s.wire_type == 0) size = static_cast<int64_t>(s.number);
        }
        if (!dim.ok() || size < 0) return bad("malformed dimension");
        e->shape.push_back(size);
      }
      if (!dims.ok()) return bad("malformed shape");
    } else if (f.field == kDtype && f.wire_type == 0) {
      e->dtype = f.number;
    } else if (f.field == kShardId && f.wire_type == 0) {
      e->shard = static_cast<int>(f.number);
    } else if (f.field == kOffset && f.wire_type == 0) {
      e->offset = f.number;
    } else if (f.field == kSize && f.wire_type == 0) {
      e->size = f.number;
    } else if (f.field == kCrc && f.wire_type == 5) {
      e->masked_crc = static_cast<uint32_t>(f.number);
    }
  }
  if (!fields.ok()) return bad("not a BundleEntryProto");
  return Status::OK();
}

// Header fields: the number of data shards; InvalidArgument for a big-endian bundle.
Result<int> ParseHeader(const std::string& index, std::string_view bytes) {
  FieldReader fields(bytes);
  Field f;
  uint64_t num_shards = 0, endianness = 0;
  while (fields.Next(&f)) {
    if (f.field == kNumShards && f.wire_type == 0) num_shards = f.number;
    if (f.field == kEndianness && f.wire_type == 0) endianness = f.number;
  }
  if (!fields.ok()) return DataLoss(index + ": the header (key \"\") is not a BundleHeaderProto");
  if (num_shards < 1 || num_shards > 99999) {
    return DataLoss(index + ": header says " + std::to_string(num_shards) +
                    " data shards, expected 1 to 99999");
  }
  if (endianness != 0) {
    return InvalidArgument(index + ": a big-endian bundle; pstrain reads little-endian ones");
  }
  return static_cast<int>(num_shards);
}

// One data shard, opened when a tensor first needs it.
class DataFile {
 public:
  DataFile() = default;
  DataFile(const DataFile&) = delete;
  DataFile& operator=(const DataFile&) = delete;
  ~DataFile() {
    if (fd_ >= 0) close(fd_);
  }

  Status Read(const std::string& path, const std::string& name, const Entry& e, std::string* out) {
    if (fd_ < 0) {
      fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd_ < 0) {
        const int err = errno;
        const std::string what =
            "cannot open '" + path + "', the data of tensor '" + name + "': " + std::strerror(err);
        return err == ENOENT ? DataLoss(what) : Unavailable(what);
      }
      struct stat st;
      if (fstat(fd_, &st) != 0) return Unavailable("cannot stat '" + path + "'");
      bytes_ = static_cast<uint64_t>(st.st_size);
    }
    if (e.offset > bytes_ || e.size > bytes_ - e.offset) {
      return DataLoss(path + ": truncated: tensor '" + name + "' lies at [" +
                      std::to_string(e.offset) + ", +" + std::to_string(e.size) +
                      ") but the file has " + std::to_string(bytes_) + " bytes");
    }
    out->resize(e.size);
    if (lseek(fd_, static_cast<off_t>(e.offset), SEEK_SET) < 0 ||
        !ReadFull(fd_, out->data(), e.size)) {
      return Unavailable("cannot read tensor '" + name + "' from '" + path + "'");
    }
    const uint32_t crc = crc32c::Value(out->data(), out->size());
    if (crc != crc32c::Unmask(e.masked_crc)) {
      return DataLoss(path + ": checksum mismatch in tensor '" + name + "' (its bytes [" +
                      std::to_string(e.offset) + ", +" + std::to_string(e.size) +
                      ") do not match the CRC-32C in the .index)");
    }
    return Status::OK();
  }

 private:
  int fd_ = -1;
  uint64_t bytes_ = 0;
};

}  // namespace

std::string BundleIndexPath(const std::string& prefix) { return prefix + ".index"; }

std::string BundleDataPath(const std::string& prefix, int shard, int num_shards) {
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), ".data-%05d-of-%05d", shard, num_shards);
  return prefix + suffix;
}

bool IsTfBundle(const std::string& prefix) {
  std::error_code ec;
  return std::filesystem::is_regular_file(BundleIndexPath(prefix), ec);
}

Status WriteTfBundle(const std::string& prefix,
                     const std::map<std::string, BundleTensor>& tensors) {
  TableEntries index = {{"", EncodeHeader()}};
  ASSIGN_OR_RETURN(AtomicFileWriter data, AtomicFileWriter::Create(BundleDataPath(prefix, 0, 1)));
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {  // std::map: bytewise order, as the table needs
    if (name.empty()) return InvalidArgument(prefix + ": a tensor has an empty name");
    uint64_t elements = 1;
    for (int64_t d : t.shape) elements *= static_cast<uint64_t>(d);
    if (t.data.size() != elements * ElementBytes(t.dtype)) {
      return InvalidArgument(prefix + ": tensor '" + name + "' has " +
                             std::to_string(t.data.size()) + " bytes, expected " +
                             std::to_string(elements * ElementBytes(t.dtype)) + " for its shape");
    }
    RETURN_IF_ERROR(data.Append(t.data.data(), t.data.size()));
    index.emplace_back(name, EncodeEntry(t, offset, crc32c::Value(t.data.data(), t.data.size())));
    offset += t.data.size();
  }
  RETURN_IF_ERROR(data.Commit());
  ASSIGN_OR_RETURN(std::string table, BuildTable(index));
  return WriteFileAtomically(BundleIndexPath(prefix), table);
}

Result<Bundle> ReadTfBundle(const std::string& prefix) {
  const std::string index_path = BundleIndexPath(prefix);
  Result<std::string> bytes = ReadFileToString(index_path);
  if (!bytes.ok()) {
    return Status(bytes.status().code(),
                  "TensorFlow checkpoint '" + prefix +
                      "': cannot read its index: " + bytes.status().message());
  }
  ASSIGN_OR_RETURN(TableEntries entries, ReadTable(*bytes, index_path));
  if (entries.empty() || !entries[0].first.empty()) {
    return DataLoss(index_path + ": no header entry (key \"\"); not a tensor bundle index");
  }
  ASSIGN_OR_RETURN(int num_shards, ParseHeader(index_path, entries[0].second));
  std::vector<DataFile> shards(static_cast<size_t>(num_shards));
  Bundle out;
  for (size_t i = 1; i < entries.size(); ++i) {
    const std::string& name = entries[i].first;
    Entry e;
    RETURN_IF_ERROR(ParseEntry(index_path, name, entries[i].second, &e));
    if (!IsReadable(e.dtype)) {
      out.skipped.push_back(name);
      continue;
    }
    BundleTensor t;
    t.dtype = static_cast<TfDtype>(e.dtype);
    t.shape = e.shape;
    uint64_t bytes = ElementBytes(t.dtype);
    bool overflow = false;
    for (int64_t d : e.shape) overflow |= __builtin_mul_overflow(bytes, d, &bytes);
    if (overflow || e.size != bytes) {
      return DataLoss(index_path + ": tensor '" + name + "' has " + std::to_string(e.size) +
                      " bytes, which its type and shape do not fill");
    }
    if (e.shard < 0 || e.shard >= num_shards) {
      return DataLoss(index_path + ": tensor '" + name + "' is in data shard " +
                      std::to_string(e.shard) + " of " + std::to_string(num_shards));
    }
    RETURN_IF_ERROR(shards[static_cast<size_t>(e.shard)].Read(
        BundleDataPath(prefix, e.shard, num_shards), name, e, &t.data));
    out.tensors.emplace(name, std::move(t));
  }
  return out;
}

}  // namespace pstrain
