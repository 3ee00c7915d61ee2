#include "common/record_source.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/crc32c.h"
#include "common/enum_names.h"
#include "common/little_endian.h"

namespace pstrain {
namespace {

constexpr size_t kInputBytes = size_t{256} << 10;

std::string Errno() { return std::strerror(errno); }

// zlib's window bits for each format (inflate and deflate).
int WindowBits(Compression c) { return c == Compression::kGzip ? 15 + 16 : 15; }

Compression FromHeader(const unsigned char* b, size_t n) {
  if (n >= 12 && crc32c::Unmask(little_endian::Get32(reinterpret_cast<const char*>(b) + 8)) ==
                     crc32c::Value(reinterpret_cast<const char*>(b), 8)) {
    return Compression::kNone;  // a valid record header
  }
  if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b) return Compression::kGzip;
  if (n >= 2 && (b[0] & 0x0f) == 8 && ((b[0] << 8) | b[1]) % 31 == 0) return Compression::kZlib;
  return Compression::kNone;
}

constexpr EnumName<Compression> kCompressions[] = {{Compression::kAuto, "auto"},
                                                   {Compression::kNone, "none"},
                                                   {Compression::kGzip, "gzip"},
                                                   {Compression::kZlib, "zlib"}};

}  // namespace

// Names are read in any case, and an empty one means none (a config that leaves it blank).
Result<Compression> CompressionNamed(const std::string& name) {
  std::string n = name.empty() ? "none" : name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  Result<Compression> named = ValueNamed(kCompressions, n, "compression");
  if (named.ok()) return named;
  return InvalidArgument("compression '" + name + "': expected " + NamesOf(kCompressions));
}

const char* CompressionName(Compression c) { return NameOf(kCompressions, c, "?"); }

Result<Compression> SniffCompression(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return NotFound("cannot open '" + path + "': " + Errno());
  unsigned char head[12];
  const size_t n = std::fread(head, 1, sizeof(head), f);
  std::fclose(f);
  return FromHeader(head, n);
}

struct RecordSource::Inflater {
  z_stream z{};
  std::vector<unsigned char> input = std::vector<unsigned char>(kInputBytes);
  bool ended = false;  // the stream's end was read
  ~Inflater() { inflateEnd(&z); }
};

RecordSource::RecordSource(FILE* f, std::string path, Compression c)
    : file_(f), path_(std::move(path)), compression_(c) {}

RecordSource::~RecordSource() {
  if (file_) std::fclose(file_);
}

Result<std::unique_ptr<RecordSource>> RecordSource::Open(const std::string& path,
                                                         Compression compression) {
  if (compression == Compression::kAuto) {
    ASSIGN_OR_RETURN(compression, SniffCompression(path));
  }
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return NotFound("cannot open '" + path + "': " + Errno());
  std::unique_ptr<RecordSource> s(new RecordSource(f, path, compression));
  if (compression != Compression::kNone) {
    s->inflater_ = std::make_unique<Inflater>();
    if (inflateInit2(&s->inflater_->z, WindowBits(compression)) != Z_OK) {
      return Internal("zlib could not start inflating " + path);
    }
  }
  return s;
}

Status RecordSource::Refill() {
  z_stream& z = inflater_->z;
  if (z.avail_in > 0) return Status::OK();
  const size_t n = std::fread(inflater_->input.data(), 1, inflater_->input.size(), file_);
  if (n == 0 && std::ferror(file_)) return DataLoss("cannot read " + path_ + ": " + Errno());
  z.next_in = inflater_->input.data();
  z.avail_in = static_cast<uInt>(n);
  return Status::OK();
}

Result<size_t> RecordSource::Read(char* out, size_t n) {
  if (!inflater_) {
    const size_t got = std::fread(out, 1, n, file_);
    // A read error is not the end of the file: said, not taken for a record cut short.
    if (got < n && std::ferror(file_)) return DataLoss("cannot read " + path_ + ": " + Errno());
    return got;
  }
  z_stream& z = inflater_->z;
  size_t done = 0;
  while (done < n) {
    RETURN_IF_ERROR(Refill());
    if (z.avail_in == 0) {
      if (inflater_->ended) break;  // the end of the data
      return DataLoss(path_ + " ends inside its " + CompressionName(compression_) +
                      " stream (cut short?)");
    }
    if (inflater_->ended) {
      // GZIP allows members one after another; ZLIB data after its stream is an error.
      if (compression_ != Compression::kGzip) {
        return DataLoss(path_ + " has bytes after the end of its zlib stream");
      }
      inflateReset(&z);
      inflater_->ended = false;
    }
    z.next_out = reinterpret_cast<Bytef*>(out + done);
    z.avail_out = static_cast<uInt>(std::min<size_t>(n - done, 1u << 30));
    const uInt before = z.avail_out;
    const int rc = inflate(&z, Z_NO_FLUSH);
    done += before - z.avail_out;
    if (rc == Z_STREAM_END) {
      inflater_->ended = true;
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      return DataLoss(path_ + " is not a valid " + CompressionName(compression_) + " stream (" +
                      (z.msg ? z.msg : "zlib error " + std::to_string(rc)) + ")");
    }
  }
  return done;
}

Status CompressFile(const std::string& in, const std::string& out, Compression compression) {
  if (compression != Compression::kGzip && compression != Compression::kZlib) {
    return InvalidArgument("CompressFile writes gzip or zlib");
  }
  FILE* src = std::fopen(in.c_str(), "rb");
  if (!src) return NotFound("cannot open '" + in + "': " + Errno());
  FILE* dst = std::fopen(out.c_str(), "wb");
  if (!dst) {
    std::fclose(src);
    return Unavailable("cannot open '" + out + "' for writing: " + Errno());
  }
  z_stream z{};
  Status status;
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, WindowBits(compression), 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    status = Internal("zlib could not start deflating " + in);
  }
  std::vector<unsigned char> input(kInputBytes), output(kInputBytes);
  for (bool end = false; status.ok() && !end;) {
    const size_t n = std::fread(input.data(), 1, input.size(), src);
    end = n < input.size();
    z.next_in = input.data();
    z.avail_in = static_cast<uInt>(n);
    do {
      z.next_out = output.data();
      z.avail_out = static_cast<uInt>(output.size());
      deflate(&z, end ? Z_FINISH : Z_NO_FLUSH);
      const size_t have = output.size() - z.avail_out;
      if (std::fwrite(output.data(), 1, have, dst) != have) {
        status = Unavailable("cannot write '" + out + "': " + Errno());
        break;
      }
    } while (z.avail_out == 0);
  }
  deflateEnd(&z);
  std::fclose(src);
  if (std::fclose(dst) != 0 && status.ok()) {
    status = Unavailable("cannot write '" + out + "': " + Errno());
  }
  return status;
}

}  // namespace pstrain
