// TFRecord framing: uint64 length, masked CRC-32C of the length, data, masked CRC-32C of the
// data (all little-endian). Used by TFRecord data files and TensorBoard event files.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "common/status.h"

namespace pstrain {

class RecordWriter {
 public:
  // Opens (truncating, or appending when `append`) `path` for writing.
  static Result<RecordWriter> Open(const std::string& path, bool append = false);
  RecordWriter(RecordWriter&& o) noexcept;
  RecordWriter& operator=(RecordWriter&& o) noexcept;
  RecordWriter(const RecordWriter&) = delete;
  ~RecordWriter();

  Status Write(const std::string& record);
  Status Flush();  // to the OS
  Status Sync();   // to the disk (fsync)
  Status Close();
  const std::string& path() const { return path_; }

 private:
  RecordWriter(FILE* f, std::string path) : file_(f), path_(std::move(path)) {}
  FILE* file_ = nullptr;
  std::string path_;
};

class RecordReader {
 public:
  static Result<RecordReader> Open(const std::string& path);
  RecordReader(RecordReader&& o) noexcept;
  RecordReader& operator=(RecordReader&& o) noexcept;
  RecordReader(const RecordReader&) = delete;
  ~RecordReader();

  // Reads the next record into *record. Returns OutOfRange at a clean end of file, and
  // DataLoss naming the file and byte offset for a corrupt or truncated record.
  Status Next(std::string* record);
  // Byte offset of the next record.
  uint64_t offset() const { return offset_; }
  const std::string& path() const { return path_; }

 private:
  RecordReader(FILE* f, std::string path) : file_(f), path_(std::move(path)) {}
  FILE* file_ = nullptr;
  std::string path_;
  uint64_t offset_ = 0;
};

// The records in a TFRecord file, from their headers alone (each length's CRC checked, the data
// skipped, not read): what an epoch holds, as TensorFlow users give it by hand. A corrupt
// header or a file that ends inside a record is DataLoss naming the file and byte offset.
Result<int64_t> CountRecords(const std::string& path);

}  // namespace pstrain
