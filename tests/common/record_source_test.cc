// Compressed TFRecord files (common/record_source.h), as TFRecordOptions(compression_type) reads
// and writes them: the whole file GZIP- or ZLIB-compressed. GZIP files from GNU gzip (another
// implementation of deflate than zlib's) read back; what CompressFile writes, gzip -d and
// Python's zlib read back; `auto` tells all three kinds apart; a compressed file read as
// uncompressed says what it looks like; a cut-short stream is named.
#include "common/record_source.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/record_io.h"
#include "tests/test_env.h"

namespace pstrain {
namespace {

std::string TempPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }

std::vector<std::string> Records() {
  std::vector<std::string> r = {"first", "", std::string(300000, 'x')};
  for (int i = 0; i < 50; ++i) r.push_back("record " + std::to_string(i * 7919));
  return r;
}

std::string WritePlain(const std::string& name) {
  const std::string path = TempPath(name);
  auto w = RecordWriter::Open(path);
  EXPECT_TRUE(w.ok());
  for (const std::string& r : Records()) EXPECT_TRUE(w->Write(r).ok());
  EXPECT_TRUE(w->Close().ok());
  return path;
}

std::vector<std::string> ReadAll(const std::string& path, Compression c) {
  auto reader = RecordReader::Open(path, c);
  EXPECT_TRUE(reader.ok()) << reader.status().ToString();
  std::vector<std::string> out;
  std::string record;
  for (Status s = reader->Next(&record); s.ok(); s = reader->Next(&record)) out.push_back(record);
  return out;
}

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(RecordSourceTest, GnuGzipFilesReadBackWhetherToldOrDetected) {
  const std::string plain = WritePlain("gnu.tfrecord");
  ASSERT_EQ(std::system(("gzip -c " + plain + " > " + plain + ".gz").c_str()), 0);
  EXPECT_EQ(SniffCompression(plain + ".gz").value(), Compression::kGzip);
  EXPECT_EQ(SniffCompression(plain).value(), Compression::kNone);
  EXPECT_EQ(ReadAll(plain + ".gz", Compression::kGzip), Records());
  EXPECT_EQ(ReadAll(plain + ".gz", Compression::kAuto), Records());
  EXPECT_EQ(CountRecords(plain + ".gz").value(), static_cast<int64_t>(Records().size()));
  // Two gzip members one after the other (`cat a.gz b.gz`) are one stream of records.
  ASSERT_EQ(std::system(("cat " + plain + ".gz " + plain + ".gz > " + plain + ".2.gz").c_str()), 0);
  EXPECT_EQ(CountRecords(plain + ".2.gz", Compression::kGzip).value(),
            2 * static_cast<int64_t>(Records().size()));
}

TEST(RecordSourceTest, WhatCompressFileWritesIsStandardGzipAndZlib) {
  const std::string plain = WritePlain("ours.tfrecord");
  ASSERT_TRUE(CompressFile(plain, plain + ".gz", Compression::kGzip).ok());
  ASSERT_TRUE(CompressFile(plain, plain + ".zz", Compression::kZlib).ok());
  EXPECT_LT(FileBytes(plain + ".zz").size(), FileBytes(plain).size() / 10);
  EXPECT_EQ(SniffCompression(plain + ".zz").value(), Compression::kZlib);
  EXPECT_EQ(ReadAll(plain + ".zz", Compression::kAuto), Records());
  EXPECT_EQ(ReadAll(plain + ".gz", Compression::kAuto), Records());
  // Other readers agree: GNU gzip, and Python's zlib (TensorFlow's ZLIB is RFC 1950).
  ASSERT_EQ(std::system(("gzip -dc " + plain + ".gz > " + plain + ".back").c_str()), 0);
  EXPECT_EQ(FileBytes(plain + ".back"), FileBytes(plain));
  const std::string python = "python3 -c \"import sys, zlib; sys.stdout.buffer.write(zlib." +
                             std::string("decompress(open(sys.argv[1], 'rb').read()))\" ") + plain +
                             ".zz > " + plain + ".back2";
  ASSERT_EQ(std::system(python.c_str()), 0);
  EXPECT_EQ(FileBytes(plain + ".back2"), FileBytes(plain));
}

TEST(RecordSourceTest, ACompressedFileReadAsUncompressedSaysWhatItLooksLike) {
  const std::string plain = WritePlain("told.tfrecord");
  ASSERT_TRUE(CompressFile(plain, plain + ".gz", Compression::kGzip).ok());
  auto reader = RecordReader::Open(plain + ".gz", Compression::kNone);
  ASSERT_TRUE(reader.ok());
  std::string record;
  Status s = reader->Next(&record);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("at byte offset 0"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("the file looks gzip-compressed: set `compression: gzip` in the "
                             "input config, or leave it out (auto)"),
            std::string::npos)
      << s.message();
}

TEST(RecordSourceTest, ACutShortOrCorruptStreamIsNamed) {
  const std::string plain = WritePlain("cut.tfrecord");
  ASSERT_TRUE(CompressFile(plain, plain + ".zz", Compression::kZlib).ok());
  const std::string bytes = FileBytes(plain + ".zz");
  std::ofstream(plain + ".cut.zz", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  Result<int64_t> cut = CountRecords(plain + ".cut.zz", Compression::kZlib);
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(cut.status().message().find("ends inside its zlib stream"), std::string::npos)
      << cut.status().message();
  std::string flipped = bytes;
  flipped[flipped.size() / 3] ^= 0x55;
  std::ofstream(plain + ".bad.zz", std::ios::binary) << flipped;
  Result<int64_t> bad = CountRecords(plain + ".bad.zz", Compression::kZlib);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss) << bad.status().ToString();
  EXPECT_NE(bad.status().message().find(plain + ".bad.zz"), std::string::npos)
      << bad.status().message();
}

TEST(RecordSourceTest, CompressionNamesAreTensorFlowsInAnyCase) {
  EXPECT_EQ(CompressionNamed("GZIP").value(), Compression::kGzip);
  EXPECT_EQ(CompressionNamed("zlib").value(), Compression::kZlib);
  EXPECT_EQ(CompressionNamed("").value(), Compression::kNone);
  EXPECT_EQ(CompressionNamed("auto").value(), Compression::kAuto);
  EXPECT_NE(CompressionNamed("snappy").status().message().find("expected auto, none, gzip or zlib"),
            std::string::npos);
}

TEST(RecordSourceTest, AReadErrorIsDataLossNotAnEmptyFile) {
  // A directory opens as a FILE on Linux and fails at its first read (EISDIR).
  const std::string dir = TempPath("a_directory");
  std::filesystem::create_directories(dir);
  auto source = RecordSource::Open(dir, Compression::kNone);
  if (!source.ok())
    GTEST_SKIP() << "this libc does not open a directory: " << source.status().ToString();
  char buffer[16];
  Result<size_t> n = (*source)->Read(buffer, sizeof(buffer));
  ASSERT_FALSE(n.ok()) << "read " << *n << " bytes of a directory";
  EXPECT_EQ(n.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(n.status().message().find("cannot read " + dir), std::string::npos)
      << n.status().ToString();
}

// TensorFlow's own writer (the test venv's tensorflow): what tf.io.TFRecordWriter writes with
// TFRecordOptions("GZIP"), ("ZLIB") and none reads back whole, told or detected.
TEST(RecordSourceTest, FilesTensorFlowWroteReadBackWhetherToldOrDetected) {
  const std::string python = testing::TestPython();
  if (python.empty() ||
      std::system(("'" + python + "' -c 'import tensorflow' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "needs the test venv's tensorflow (scripts/test-venv.sh BUILD_DIR)";
  }
  const std::string dir = TempPath("written_by_tensorflow");
  std::filesystem::create_directories(dir);
  const std::string script =
      "import sys, tensorflow as tf\n"
      "records = [b'first', b'', b'x' * 300000] + [b'record %d' % (i * 7919) for i in range(50)]\n"
      "for kind in ('GZIP', 'ZLIB', ''):\n"
      "    with tf.io.TFRecordWriter(sys.argv[1] + '/' + (kind or 'NONE'), "
      "tf.io.TFRecordOptions(compression_type=kind)) as w:\n"
      "        for r in records: w.write(r)\n";
  {
    std::ofstream f(dir + "/write.py");
    f << script;
  }
  ASSERT_EQ(std::system(("'" + python + "' " + dir + "/write.py " + dir + " 2>/dev/null").c_str()),
            0);
  for (const auto& [name, told] : {std::pair{"GZIP", Compression::kGzip},
                                   {"ZLIB", Compression::kZlib},
                                   {"NONE", Compression::kNone}}) {
    EXPECT_EQ(ReadAll(dir + "/" + name, told), Records()) << name << ", told";
    EXPECT_EQ(ReadAll(dir + "/" + name, Compression::kAuto), Records()) << name << ", detected";
  }
}

}  // namespace
}  // namespace pstrain
