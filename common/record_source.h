// The bytes of a TFRecord file, as TensorFlow's TFRecordOptions(compression_type) reads them:
// the file itself, or the file inflated as one GZIP (RFC 1952) or ZLIB (RFC 1950) stream, the
// whole file compressed, not each record. `kAuto` tells them apart from the file's first bytes:
// a valid record header means uncompressed (a TFRecord header's CRC makes it unambiguous), else
// GZIP's or ZLIB's header says which.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "common/status.h"

namespace pstrain {

enum class Compression { kAuto, kNone, kGzip, kZlib };

// "auto", "none" (or ""), "gzip", "zlib", in any case (TensorFlow writes "GZIP", "ZLIB").
Result<Compression> CompressionNamed(const std::string& name);
const char* CompressionName(Compression c);

// What `path`'s first bytes say it is (kNone for a file too short to tell).
Result<Compression> SniffCompression(const std::string& path);

class RecordSource {
 public:
  // `compression` kAuto: sniffed. NotFound naming the file if it cannot be opened.
  static Result<std::unique_ptr<RecordSource>> Open(const std::string& path,
                                                    Compression compression);
  ~RecordSource();
  // Up to `n` bytes into `out`; fewer only at the end of the data. DataLoss naming the file for
  // a compressed stream that is corrupt or cut short.
  Result<size_t> Read(char* out, size_t n);
  Compression compression() const { return compression_; }

 private:
  RecordSource(FILE* f, std::string path, Compression c);
  Status Refill();

  FILE* file_;
  std::string path_;
  Compression compression_;
  struct Inflater;
  std::unique_ptr<Inflater> inflater_;  // compressed only
};

// Writes `in` compressed as `compression` (gzip or zlib) to `out`: what TFRecordWriter with that
// compression_type writes.
Status CompressFile(const std::string& in, const std::string& out, Compression compression);

}  // namespace pstrain
