// Small image sets and IDX files for data tests.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "common/data/idx.h"

namespace pstrain {
namespace testing_data {

constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

inline bool HaveFashionMnist() {
  struct stat st;
  return stat((std::string(kFashionMnistDir) + "/train-images-idx3-ubyte.gz").c_str(), &st) == 0;
}

// A fresh directory for one test.
inline std::string TestDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string dir =
      ::testing::TempDir() + "/pstrain_data_" + info->test_suite_name() + "_" + info->name();
  std::string cmd = "rm -rf '" + dir + "' && mkdir -p '" + dir + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return dir;
}

// Label i = i (so tests can track each example); pixels vary with the example and position.
inline ImageSet MakeImageSet(int64_t count, int64_t height = 4, int64_t width = 5,
                             int64_t channels = 1) {
  ImageSet set;
  set.count = count;
  set.height = height;
  set.width = width;
  set.channels = channels;
  for (int64_t i = 0; i < count; ++i) {
    for (int64_t j = 0; j < set.example_bytes(); ++j) {
      set.pixels.push_back(static_cast<uint8_t>((i * 31 + j * 7) % 256));
    }
    set.labels.push_back(static_cast<int32_t>(i));
  }
  return set;
}

inline std::string IdxHeader(int dtype, const std::vector<int64_t>& dims) {
  std::string h = {0, 0, static_cast<char>(dtype), static_cast<char>(dims.size())};
  for (int64_t d : dims) {
    for (int s = 24; s >= 0; s -= 8) h.push_back(static_cast<char>((d >> s) & 0xff));
  }
  return h;
}

inline void WriteFile(const std::string& path, const std::string& bytes, bool gzip) {
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr) << path;
    ASSERT_EQ(gzwrite(f, bytes.data(), bytes.size()), static_cast<int>(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(path, std::ios::binary) << bytes;
  }
}

// Writes `set` as <dir>/<prefix>-images-idx3-ubyte[.gz] and -labels-idx1-ubyte[.gz].
inline void WriteIdx(const ImageSet& set, const std::string& dir, const std::string& prefix,
                     bool gzip) {
  const std::string ext = gzip ? ".gz" : "";
  std::string images = IdxHeader(0x08, {set.count, set.height, set.width});
  images.append(set.pixels.begin(), set.pixels.end());
  std::string labels = IdxHeader(0x08, {set.count});
  for (int32_t l : set.labels) labels.push_back(static_cast<char>(l));
  WriteFile(dir + "/" + prefix + "-images-idx3-ubyte" + ext, images, gzip);
  WriteFile(dir + "/" + prefix + "-labels-idx1-ubyte" + ext, labels, gzip);
}

inline void FlipByte(const std::string& path, int64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c;
  f.get(c);
  f.seekp(offset);
  f.put(static_cast<char>(c ^ 0x40));
}

inline int64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

inline bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace testing_data
}  // namespace pstrain
