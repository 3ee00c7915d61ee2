#include "common/record_io.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/crc32c.h"
#include "common/little_endian.h"

namespace pstrain {
namespace {

// Reject absurd lengths before allocating: a corrupt length must not exhaust memory.
constexpr uint64_t kMaxRecordBytes = 1ull << 31;
constexpr size_t kReadChunkBytes = size_t{4} << 20;

std::string Errno() { return std::strerror(errno); }

}  // namespace

Result<RecordWriter> RecordWriter::Open(const std::string& path, bool append) {
  FILE* f = std::fopen(path.c_str(), append ? "ab" : "wb");
  if (!f) return Unavailable("cannot open '" + path + "' for writing: " + Errno());
  return RecordWriter(f, path);
}

RecordWriter::RecordWriter(RecordWriter&& o) noexcept : file_(o.file_), path_(std::move(o.path_)) {
  o.file_ = nullptr;
}

RecordWriter& RecordWriter::operator=(RecordWriter&& o) noexcept {
  if (this != &o) {
    if (file_) std::fclose(file_);
    file_ = o.file_;
    path_ = std::move(o.path_);
    o.file_ = nullptr;
  }
  return *this;
}

RecordWriter::~RecordWriter() {
  if (file_) std::fclose(file_);
}

Status RecordWriter::Write(const std::string& record) {
  if (!file_) return FailedPrecondition("record writer for '" + path_ + "' is closed");
  char header[12];
  little_endian::Put64(header, record.size());
  little_endian::Put32(header + 8, crc32c::Mask(crc32c::Value(header, 8)));
  char footer[4];
  little_endian::Put32(footer, crc32c::Mask(crc32c::Value(record.data(), record.size())));
  if (std::fwrite(header, 1, 12, file_) != 12 ||
      std::fwrite(record.data(), 1, record.size(), file_) != record.size() ||
      std::fwrite(footer, 1, 4, file_) != 4) {
    return Unavailable("writing a record to '" + path_ + "': " + Errno());
  }
  return Status::OK();
}

Status RecordWriter::Flush() {
  if (file_ && std::fflush(file_) != 0) return Unavailable("flushing '" + path_ + "': " + Errno());
  return Status::OK();
}

Status RecordWriter::Sync() {
  RETURN_IF_ERROR(Flush());
  if (file_ && fsync(fileno(file_)) != 0) return Unavailable("fsync '" + path_ + "': " + Errno());
  return Status::OK();
}

Status RecordWriter::Close() {
  if (!file_) return Status::OK();
  Status s = Flush();
  std::fclose(file_);
  file_ = nullptr;
  return s;
}

Result<RecordReader> RecordReader::Open(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return NotFound("cannot open '" + path + "': " + Errno());
  return RecordReader(f, path);
}

RecordReader::RecordReader(RecordReader&& o) noexcept
    : file_(o.file_), path_(std::move(o.path_)), offset_(o.offset_) {
  o.file_ = nullptr;
}

RecordReader& RecordReader::operator=(RecordReader&& o) noexcept {
  if (this != &o) {
    if (file_) std::fclose(file_);
    file_ = o.file_;
    path_ = std::move(o.path_);
    offset_ = o.offset_;
    o.file_ = nullptr;
  }
  return *this;
}

RecordReader::~RecordReader() {
  if (file_) std::fclose(file_);
}

Status RecordReader::Next(std::string* record) {
  const std::string where = path_ + " at byte offset " + std::to_string(offset_);
  char header[12];
  size_t got = std::fread(header, 1, 12, file_);
  if (got == 0 && std::feof(file_)) return OutOfRange("end of " + path_);
  if (got != 12) return DataLoss("truncated record header in " + where);
  if (crc32c::Unmask(little_endian::Get32(header + 8)) != crc32c::Value(header, 8)) {
    return DataLoss("corrupt record length (CRC mismatch) in " + where);
  }
  uint64_t length = little_endian::Get64(header);
  if (length > kMaxRecordBytes) {
    return DataLoss("record length " + std::to_string(length) + " exceeds the limit in " + where);
  }
  // Grown as the bytes arrive: a corrupt length in a small file must not make us allocate the
  // gigabytes it claims.
  record->clear();
  while (record->size() < length) {
    const size_t done = record->size();
    const size_t want = std::min<uint64_t>(length - done, kReadChunkBytes);
    record->resize(done + want);
    const size_t n = std::fread(record->data() + done, 1, want, file_);
    if (n < want) {
      record->resize(done + n);
      break;
    }
  }
  char footer[4];
  if (record->size() < length || std::fread(footer, 1, 4, file_) != 4) {
    return DataLoss("truncated record (expected " + std::to_string(length) + " bytes) in " + where);
  }
  if (crc32c::Unmask(little_endian::Get32(footer)) != crc32c::Value(record->data(), length)) {
    return DataLoss("corrupt record data (CRC mismatch) in " + where);
  }
  offset_ += 12 + length + 4;
  return Status::OK();
}

Result<int64_t> CountRecords(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return NotFound("cannot open '" + path + "': " + Errno());
  std::fseek(f, 0, SEEK_END);
  const uint64_t size = static_cast<uint64_t>(std::ftell(f));
  int64_t count = 0;
  uint64_t offset = 0;
  Status status;
  while (offset < size) {
    const std::string where = path + " at byte offset " + std::to_string(offset);
    char header[12];
    if (std::fseek(f, static_cast<long>(offset), SEEK_SET) != 0 ||
        std::fread(header, 1, 12, f) != 12) {
      status = DataLoss("truncated record header in " + where);
      break;
    }
    if (crc32c::Unmask(little_endian::Get32(header + 8)) != crc32c::Value(header, 8)) {
      status = DataLoss("corrupt record length (CRC mismatch) in " + where);
      break;
    }
    const uint64_t length = little_endian::Get64(header);
    if (length > kMaxRecordBytes || size - offset < 12 + length + 4) {
      status =
          DataLoss("truncated record (expected " + std::to_string(length) + " bytes) in " + where);
      break;
    }
    offset += 12 + length + 4;
    ++count;
  }
  std::fclose(f);
  if (!status.ok()) return status;
  return count;
}

}  // namespace pstrain
