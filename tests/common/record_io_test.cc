#include "common/record_io.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "common/crc32c.h"

namespace pstrain {
namespace {

TEST(Crc32cTest, MatchesPublishedCheckValues) {
  // RFC 3720 B.4 test vectors and the standard "123456789" check value.
  EXPECT_EQ(crc32c::Value("123456789", 9), 0xe3069283u);
  std::string zeros(32, '\0');
  EXPECT_EQ(crc32c::Value(zeros.data(), zeros.size()), 0x8a9136aau);
  std::string ones(32, '\xff');
  EXPECT_EQ(crc32c::Value(ones.data(), ones.size()), 0x62a8ab43u);
  // Extending in pieces equals one pass.
  EXPECT_EQ(crc32c::Extend(crc32c::Value("12345", 5), "6789", 4), 0xe3069283u);
  EXPECT_EQ(crc32c::Unmask(crc32c::Mask(0x12345678u)), 0x12345678u);
}

std::string TempPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }

TEST(RecordIoTest, RoundTripsRecords) {
  std::string path = TempPath("roundtrip.tfrecord");
  {
    auto w = RecordWriter::Open(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->Write("hello").ok());
    ASSERT_TRUE(w->Write("").ok());
    ASSERT_TRUE(w->Write(std::string(100000, 'x')).ok());
    ASSERT_TRUE(w->Close().ok());
  }
  auto r = RecordReader::Open(path);
  ASSERT_TRUE(r.ok());
  std::string rec;
  ASSERT_TRUE(r->Next(&rec).ok());
  EXPECT_EQ(rec, "hello");
  ASSERT_TRUE(r->Next(&rec).ok());
  EXPECT_EQ(rec, "");
  ASSERT_TRUE(r->Next(&rec).ok());
  EXPECT_EQ(rec.size(), 100000u);
  EXPECT_EQ(r->Next(&rec).code(), StatusCode::kOutOfRange);
}

void FlipByte(const std::string& path, long offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c;
  f.get(c);
  f.seekp(offset);
  f.put(static_cast<char>(c ^ 0x40));
}

TEST(RecordIoTest, CorruptDataIsNamedWithFileAndOffset) {
  std::string path = TempPath("corrupt.tfrecord");
  {
    auto w = RecordWriter::Open(path);
    ASSERT_TRUE(w->Write("first").ok());
    ASSERT_TRUE(w->Write("second").ok());
  }
  FlipByte(path, 21 + 12 + 2);  // inside the second record's data
  auto r = RecordReader::Open(path);
  std::string rec;
  ASSERT_TRUE(r->Next(&rec).ok());
  Status s = r->Next(&rec);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find(path + " at byte offset 21"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("CRC mismatch"), std::string::npos) << s.message();
}

TEST(RecordIoTest, TruncatedRecordIsDataLoss) {
  std::string path = TempPath("truncated.tfrecord");
  {
    auto w = RecordWriter::Open(path);
    ASSERT_TRUE(w->Write("a complete record").ok());
  }
  ASSERT_EQ(truncate(path.c_str(), 20), 0);
  auto r = RecordReader::Open(path);
  std::string rec;
  Status s = r->Next(&rec);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.message();
}

TEST(RecordIoTest, CountRecordsReadsOnlyTheHeadersAndNamesATruncatedFile) {
  std::string path = TempPath("count.tfrecord");
  {
    auto w = RecordWriter::Open(path);
    for (int i = 0; i < 37; ++i) ASSERT_TRUE(w->Write(std::string(i * 100, 'x')).ok());
  }
  Result<int64_t> n = CountRecords(path);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 37);
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  ASSERT_EQ(truncate(path.c_str(), st.st_size - 5), 0);  // inside the last record
  n = CountRecords(path);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(n.status().message().find(path + " at byte offset"), std::string::npos)
      << n.status().message();
  EXPECT_EQ(CountRecords(TempPath("absent.tfrecord")).status().code(), StatusCode::kNotFound);
}

TEST(RecordIoTest, CorruptLengthIsRefusedBeforeAllocating) {
  std::string path = TempPath("badlen.tfrecord");
  {
    auto w = RecordWriter::Open(path);
    ASSERT_TRUE(w->Write("abc").ok());
  }
  FlipByte(path, 7);  // high byte of the length
  auto r = RecordReader::Open(path);
  std::string rec;
  Status s = r->Next(&rec);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("corrupt record length"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace pstrain
