// Fuzzes the IDX reader (common/data/idx.h) on an images file and a labels file written from
// the input: one byte of flags (gzip the images, gzip the labels), the images file as a 16-bit
// length and its bytes, the labels file as the rest. Without the gzip flags the bytes are written
// as they are, so a seed that is itself gzip (or a corrupt gzip stream) is read through zlib too.
// Invariants: every error names a file; what loads is consistent (one label per image, all the
// pixels there).
#include <glog/logging.h>
#include <stdlib.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/data/idx.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_setup.h"

namespace pstrain {
namespace {

std::string g_dir;  // a fresh temp dir per process

void WriteFile(const std::string& path, const std::string& bytes, bool gzip) {
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb1");
    CHECK(f != nullptr) << path;
    CHECK_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
             static_cast<int>(bytes.size()));
    CHECK_EQ(gzclose(f), Z_OK);
    return;
  }
  FILE* f = std::fopen(path.c_str(), "wb");
  CHECK(f != nullptr) << path;
  CHECK_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  CHECK_EQ(std::fclose(f), 0);
}

void CheckNamesAFile(const Status& s, const std::string& a, const std::string& b) {
  CHECK(s.message().find(a) != std::string::npos || s.message().find(b) != std::string::npos)
      << "an error does not name the file: " << s.ToString();
}

void CheckConsistent(const ImageSet& set) {
  CHECK_GT(set.count, 0);
  CHECK_EQ(static_cast<int64_t>(set.labels.size()), set.count);
  CHECK_EQ(static_cast<int64_t>(set.pixels.size()), set.count * set.example_bytes());
}

}  // namespace
}  // namespace pstrain

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  pstrain::fuzz::QuietLogs();
  pstrain::g_dir = pstrain::fuzz::TempDirForProcess("idx");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain;
  fuzz::FuzzInput in(data, size);
  const uint8_t flags = in.Byte();
  const std::string images = in.LengthPrefixed();
  const std::string labels = in.Rest();

  // Named as Fashion-MNIST's files, so LoadFashionMnist reads them too; the .gz name only when
  // gzipped, as LoadFashionMnist prefers it.
  std::filesystem::remove_all(g_dir);
  std::filesystem::create_directory(g_dir);
  const std::string images_path = g_dir + "/train-images-idx3-ubyte" + ((flags & 1) ? ".gz" : "");
  const std::string labels_path = g_dir + "/train-labels-idx1-ubyte" + ((flags & 2) ? ".gz" : "");
  WriteFile(images_path, images, flags & 1);
  WriteFile(labels_path, labels, flags & 2);

  Result<ImageSet> set = ReadIdx(images_path, labels_path);
  if (set.ok()) {
    CheckConsistent(*set);
  } else {
    CheckNamesAFile(set.status(), images_path, labels_path);
  }
  Result<ImageSet> mnist = LoadFashionMnist(g_dir, Split::kTrain);
  if (mnist.ok()) {
    CheckConsistent(*mnist);
    CHECK(mnist->height == 28 && mnist->width == 28 && mnist->channels == 1);
    for (int32_t label : mnist->labels) CHECK(label >= 0 && label <= 9);
  } else {
    CheckNamesAFile(mnist.status(), images_path, labels_path);
  }
  return 0;
}
