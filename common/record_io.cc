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

RecordFrame FrameOf(const std::string& record) {
  RecordFrame f;
  little_endian::Put64(f.header, record.size());
  little_endian::Put32(f.header + 8, crc32c::Mask(crc32c::Value(f.header, 8)));
  little_endian::Put32(f.footer, crc32c::Mask(crc32c::Value(record.data(), record.size())));
  return f;
}

std::string FramedRecord(const std::string& record) {
  const RecordFrame f = FrameOf(record);
  return std::string(f.header, 12) + record + std::string(f.footer, 4);
}

Status RecordWriter::Write(const std::string& record) {
  if (!file_) return FailedPrecondition("record writer for '" + path_ + "' is closed");
  const RecordFrame f = FrameOf(record);
  if (std::fwrite(f.header, 1, 12, file_) != 12 ||
      std::fwrite(record.data(), 1, record.size(), file_) != record.size() ||
      std::fwrite(f.footer, 1, 4, file_) != 4) {
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

Result<RecordReader> RecordReader::Open(const std::string& path, Compression compression) {
  ASSIGN_OR_RETURN(std::unique_ptr<RecordSource> source, RecordSource::Open(path, compression));
  return RecordReader(std::move(source), path);
}

std::string RecordReader::CompressionHint() const {
  if (offset_ != 0 || source_->compression() != Compression::kNone) return "";
  Result<Compression> looks = SniffCompression(path_);
  if (!looks.ok() || *looks == Compression::kNone) return "";
  return "; the file looks " + std::string(CompressionName(*looks)) +
         "-compressed: set `compression: " + CompressionName(*looks) +
         "` in the input config, or leave it out (auto)";
}

Status RecordReader::Next(std::string* record) {
  const std::string where =
      path_ + " at byte offset " + std::to_string(offset_) +
      (source_->compression() == Compression::kNone
           ? ""
           : std::string(" of its ") + CompressionName(source_->compression()) + " data");
  char header[12];
  ASSIGN_OR_RETURN(size_t got, source_->Read(header, 12));
  if (got == 0) return OutOfRange("end of " + path_);
  if (got != 12) return DataLoss("truncated record header in " + where + CompressionHint());
  if (crc32c::Unmask(little_endian::Get32(header + 8)) != crc32c::Value(header, 8)) {
    return DataLoss("corrupt record length (CRC mismatch) in " + where + CompressionHint());
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
    ASSIGN_OR_RETURN(const size_t n, source_->Read(record->data() + done, want));
    if (n < want) {
      record->resize(done + n);
      break;
    }
  }
  char footer[4];
  if (record->size() < length) {
    return DataLoss("truncated record (expected " + std::to_string(length) + " bytes) in " + where);
  }
  ASSIGN_OR_RETURN(const size_t footer_bytes, source_->Read(footer, 4));
  if (footer_bytes != 4) {
    return DataLoss("truncated record (expected " + std::to_string(length) + " bytes) in " + where);
  }
  if (crc32c::Unmask(little_endian::Get32(footer)) != crc32c::Value(record->data(), length)) {
    return DataLoss("corrupt record data (CRC mismatch) in " + where);
  }
  offset_ += 12 + length + 4;
  return Status::OK();
}

Result<int64_t> CountRecords(const std::string& path, Compression compression) {
  if (compression == Compression::kAuto) {
    ASSIGN_OR_RETURN(compression, SniffCompression(path));
  }
  if (compression != Compression::kNone) {  // no seeking in a stream: read through it
    ASSIGN_OR_RETURN(RecordReader reader, RecordReader::Open(path, compression));
    int64_t count = 0;
    std::string record;
    for (Status s = reader.Next(&record);; s = reader.Next(&record), ++count) {
      if (s.code() == StatusCode::kOutOfRange) return count;
      RETURN_IF_ERROR(s);
    }
  }
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
