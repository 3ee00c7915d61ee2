// TFRecord framing: uint64 length, masked CRC-32C of the length, data, masked CRC-32C of the
// data (all little-endian). Used by TFRecord data files and TensorBoard event files.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "common/record_source.h"
#include "common/status.h"

namespace pstrain {

// The bytes around one record: its length and that length's masked CRC, then the data's CRC.
struct RecordFrame {
  char header[12];
  char footer[4];
};
RecordFrame FrameOf(const std::string& record);
// The record with its frame, as a file holds it.
std::string FramedRecord(const std::string& record);

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
  // `compression`: the file's (record_source.h); kAuto tells from its first bytes.
  static Result<RecordReader> Open(const std::string& path,
                                   Compression compression = Compression::kAuto);
  RecordReader(RecordReader&& o) noexcept = default;
  RecordReader& operator=(RecordReader&& o) noexcept = default;
  RecordReader(const RecordReader&) = delete;

  // Reads the next record into *record. Returns OutOfRange at a clean end of file, and
  // DataLoss naming the file and byte offset (of the decompressed bytes, for a compressed file)
  // for a corrupt or truncated record; one at the start of an uncompressed read of a file that
  // looks compressed says so.
  Status Next(std::string* record);
  // Byte offset of the next record.
  uint64_t offset() const { return offset_; }
  const std::string& path() const { return path_; }

 private:
  RecordReader(std::unique_ptr<RecordSource> source, std::string path)
      : source_(std::move(source)), path_(std::move(path)) {}
  // What a corrupt header at the start of the file means, if the file looks compressed.
  std::string CompressionHint() const;
  std::unique_ptr<RecordSource> source_;
  std::string path_;
  uint64_t offset_ = 0;
};

// The records in a TFRecord file, from their headers alone (each length's CRC checked, the data
// skipped, not read; a compressed file is inflated through): what an epoch holds, as TensorFlow
// users give it by hand. A corrupt header or a file that ends inside a record is DataLoss naming
// the file and byte offset.
Result<int64_t> CountRecords(const std::string& path, Compression compression = Compression::kAuto);

}  // namespace pstrain
