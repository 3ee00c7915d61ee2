#include "common/data/idx.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace pstrain {
namespace {

// IDX type code for unsigned bytes, the only element type Fashion-MNIST uses.
constexpr int kUbyte = 0x08;
// A corrupt header must not make us allocate without bound.
constexpr int64_t kMaxIdxBytes = int64_t{1} << 34;
constexpr int64_t kReadChunkBytes = int64_t{4} << 20;

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// Reads up to `n` bytes; returns how many were read, or -1 with *error set.
int64_t ReadFully(gzFile f, uint8_t* out, int64_t n, std::string* error) {
  int64_t got = 0;
  while (got < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<int64_t>(n - got, 1 << 30));
    const int r = gzread(f, out + got, chunk);
    if (r < 0) {
      int errnum = 0;
      *error = gzerror(f, &errnum);
      return -1;
    }
    if (r == 0) break;
    got += r;
  }
  return got;
}

// One IDX file: its dims and its bytes. `what` names the payload in errors ("pixel").
struct IdxFile {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};

Result<IdxFile> ReadIdxFile(const std::string& path, int min_rank, int max_rank, const char* what) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return NotFound("cannot open '" + path + "': " + std::strerror(errno));
  }
  GzFile f(gzopen(path.c_str(), "rb"));
  if (!f) return NotFound("cannot open '" + path + "': " + std::strerror(errno));
  gzbuffer(f.get(), 1 << 20);
  std::string gz_error;

  uint8_t magic[4];
  int64_t got = ReadFully(f.get(), magic, 4, &gz_error);
  if (got < 0) return DataLoss(path + ": cannot decompress: " + gz_error);
  if (got < 4) {
    return DataLoss(path + ": too short for an IDX header (expected 4 magic bytes, file has " +
                    std::to_string(got) + ")");
  }
  if (magic[0] != 0 || magic[1] != 0) {
    char hex[16];
    std::snprintf(hex, sizeof(hex), "0x%02x%02x%02x%02x", magic[0], magic[1], magic[2], magic[3]);
    return DataLoss(path + ": bad magic " + hex + ", expected an IDX file (0x000008NN)");
  }
  if (magic[2] != kUbyte) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02x", magic[2]);
    return DataLoss(path + ": element type " + hex +
                    " is not supported, expected 0x08 (unsigned byte)");
  }
  const int rank = magic[3];
  if (rank < min_rank || rank > max_rank) {
    return DataLoss(path + ": has " + std::to_string(rank) + " dimensions, expected " +
                    std::to_string(min_rank) +
                    (min_rank == max_rank ? "" : " or " + std::to_string(max_rank)));
  }

  IdxFile idx;
  uint8_t dim_bytes[4 * 4];
  got = ReadFully(f.get(), dim_bytes, 4 * rank, &gz_error);
  if (got < 0) return DataLoss(path + ": cannot decompress: " + gz_error);
  if (got < 4 * rank) return DataLoss(path + ": truncated in the dimension sizes");
  int64_t total = 1;
  for (int i = 0; i < rank; ++i) {
    const uint8_t* p = dim_bytes + 4 * i;
    const int64_t d = (int64_t{p[0]} << 24) | (p[1] << 16) | (p[2] << 8) | p[3];
    if (d <= 0) return DataLoss(path + ": dimension " + std::to_string(i) + " is 0");
    // Checked before multiplying: four 32-bit dims overflow int64.
    if (d > kMaxIdxBytes / total) {
      return DataLoss(path + ": dimensions describe more than " + std::to_string(kMaxIdxBytes) +
                      " bytes; the header is corrupt");
    }
    total *= d;
    idx.dims.push_back(d);
  }

  // Grown as the bytes arrive: a corrupt header in a small file must not make us allocate the
  // gigabytes it claims.
  got = 0;
  while (got < total) {
    const int64_t want = std::min(total - got, kReadChunkBytes);
    idx.data.resize(got + want);
    const int64_t n = ReadFully(f.get(), idx.data.data() + got, want, &gz_error);
    if (n < 0) return DataLoss(path + ": cannot decompress: " + gz_error);
    got += n;
    if (n < want) break;
  }
  if (got < total) {
    return DataLoss(path + ": expected " + std::to_string(total) + " " + what +
                    " bytes, file has " + std::to_string(got));
  }
  uint8_t extra;
  if (ReadFully(f.get(), &extra, 1, &gz_error) != 0) {
    return DataLoss(path + ": has bytes after the expected " + std::to_string(total) + " " + what +
                    " bytes");
  }
  return idx;
}

std::string FirstExisting(const std::string& base) {
  struct stat st;
  if (stat((base + ".gz").c_str(), &st) == 0) return base + ".gz";
  if (stat(base.c_str(), &st) == 0) return base;
  return base + ".gz";  // missing either way: name the usual file in the error
}

}  // namespace

Result<ImageSet> ReadIdx(const std::string& images_path, const std::string& labels_path) {
  ASSIGN_OR_RETURN(IdxFile images, ReadIdxFile(images_path, 3, 4, "pixel"));
  ASSIGN_OR_RETURN(IdxFile labels, ReadIdxFile(labels_path, 1, 1, "label"));
  if (images.dims[0] != labels.dims[0]) {
    return DataLoss(images_path + " has " + std::to_string(images.dims[0]) + " images but " +
                    labels_path + " has " + std::to_string(labels.dims[0]) + " labels");
  }
  ImageSet set;
  set.count = images.dims[0];
  set.height = images.dims[1];
  set.width = images.dims[2];
  set.channels = images.dims.size() == 4 ? images.dims[3] : 1;
  set.pixels = std::move(images.data);
  set.labels.assign(labels.data.begin(), labels.data.end());
  return set;
}

Result<Split> ParseSplit(const std::string& name) {
  if (name == "train") return Split::kTrain;
  if (name == "test") return Split::kTest;
  return InvalidArgument("split '" + name + "' is not known (expected train or test)");
}

const char* SplitName(Split split) { return split == Split::kTrain ? "train" : "test"; }

Result<ImageSet> LoadFashionMnist(const std::string& data_dir, Split split) {
  const std::string prefix = data_dir + "/" + (split == Split::kTrain ? "train" : "t10k");
  const std::string images_path = FirstExisting(prefix + "-images-idx3-ubyte");
  const std::string labels_path = FirstExisting(prefix + "-labels-idx1-ubyte");
  ASSIGN_OR_RETURN(ImageSet set, ReadIdx(images_path, labels_path));
  if (set.height != 28 || set.width != 28 || set.channels != 1) {
    return DataLoss(images_path + ": images are " + std::to_string(set.height) + "x" +
                    std::to_string(set.width) + "x" + std::to_string(set.channels) +
                    ", expected 28x28x1 for Fashion-MNIST");
  }
  for (int64_t i = 0; i < set.count; ++i) {
    if (set.labels[i] > 9) {
      return DataLoss(labels_path + ": label " + std::to_string(set.labels[i]) + " of example " +
                      std::to_string(i) + " is outside 0..9");
    }
  }
  return set;
}

}  // namespace pstrain
