// Fuzzes the TFRecord reader (common/record_io.h), the tf.train.Example image decoder
// (common/data/image_example.h) and the JPEG/PNG decoders (common/data/image_codec.h) on a file
// written from the input. The first byte picks how:
//   raw     the rest of the input is the file, as found on disk;
//   framed  the rest is records (16-bit length, bytes) that the harness frames with correct
//           CRCs, so the fuzzer reaches the Example parser, then an optional tail: raw bytes, or
//           a record header with a fuzzed length and a correct CRC (a corrupt length that the
//           CRC cannot catch);
//   image   (mode & 4) the rest is JPEG/PNG bytes, wrapped as `image/encoded` in one framed
//           Example as TF's conversion scripts write it, so the fuzzer mutates the image itself.
// Invariants: every error names the file; framed records read back exactly as written; a
// decoded image has the channels asked for and height x width x channels bytes.
#include <glog/logging.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/crc32c.h"
#include "common/data/image_codec.h"
#include "common/data/image_example.h"
#include "common/little_endian.h"
#include "common/record_io.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_setup.h"

namespace pstrain {
namespace {

std::string g_dir;  // a fresh temp dir per process

void WriteFile(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  CHECK(f != nullptr) << path;
  CHECK_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  CHECK_EQ(std::fclose(f), 0);
}

void CheckNamesFile(const Status& s, const std::string& path) {
  CHECK(s.message().find(path) != std::string::npos)
      << "an error does not name the file: " << s.ToString();
}

}  // namespace
}  // namespace pstrain

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  pstrain::fuzz::QuietLogs();
  pstrain::g_dir = pstrain::fuzz::TempDirForProcess("tfrecord");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain;
  fuzz::FuzzInput in(data, size);
  const uint8_t mode = in.Byte();
  const ImageShape expected = in.Pick<ImageShape>({{28, 28, 1}, {2, 2, 1}, {1, 2, 3}, {8, 8, 3}});
  const std::string path = g_dir + "/data.tfrecord";

  std::vector<std::string> written;  // framed mode: the records that must read back
  if (mode & 4) {
    written.push_back(EncodeImageFileExample(in.Rest(), "jpeg", expected, 1));
    WriteFile(path, FramedRecord(written.back()));
  } else if (mode % 2 == 0) {
    WriteFile(path, in.Rest());
  } else {
    const int64_t records = in.Range(0, 4);
    std::string file;
    for (int64_t i = 0; i < records; ++i) {
      written.push_back(in.LengthPrefixed());
      file += FramedRecord(written.back());
    }
    if (mode & 2) {  // a length the header CRC vouches for, then whatever follows
      char header[12];
      little_endian::Put64(header, in.Raw<uint64_t>());
      little_endian::Put32(header + 8, crc32c::Mask(crc32c::Value(header, 8)));
      file += std::string(header, 12);
    }
    file += in.Rest();
    WriteFile(path, file);
  }

  auto reader = RecordReader::Open(path);
  CHECK(reader.ok()) << reader.status().ToString();
  std::string record;
  for (size_t i = 0;; ++i) {
    const uint64_t offset = reader->offset();
    Status s = reader->Next(&record);
    if (!s.ok()) {
      CHECK(s.code() == StatusCode::kOutOfRange || s.code() == StatusCode::kDataLoss)
          << s.ToString();
      CheckNamesFile(s, path);
      CHECK(i >= written.size()) << "record " << i << " was written but reads as " << s.ToString();
      break;
    }
    if (i < written.size()) CHECK(record == written[i]) << "record " << i << " changed";
    std::string pixels;
    int32_t label = -1;
    const std::string where = path + " at record offset " + std::to_string(offset);
    Status decoded = DecodeImageExample(record, expected, where, &pixels, &label);
    if (decoded.ok()) {
      CHECK_EQ(static_cast<int64_t>(pixels.size()), expected.bytes());
      CHECK_GE(label, 0);
    } else {
      CheckNamesFile(decoded, path);
    }
    // As the input pipeline's prefetch threads decode: any size, the model's channels.
    ImageRecord parsed;
    if (ParseImageExample(record, expected, ExampleFeatures(), where, &parsed).ok() &&
        parsed.encoded) {
      ImageShape shape;
      Status s =
          DecodeImage(parsed.bytes, static_cast<int>(expected.depth), where, &shape, &pixels);
      if (s.ok()) {
        CHECK_EQ(shape.depth, expected.depth);
        CHECK_GE(shape.height, 1);
        CHECK_GE(shape.width, 1);
        CHECK_EQ(static_cast<int64_t>(pixels.size()), shape.bytes());
      } else {
        CHECK(s.code() == StatusCode::kDataLoss) << s.ToString();
        CheckNamesFile(s, path);
      }
    }
  }

  // The streaming reader over the same file: the same records, the same refusals.
  auto examples = ImageExampleReader::Open(path, expected);
  CHECK(examples.ok()) << examples.status().ToString();
  std::string pixels;
  int32_t label = -1;
  for (;;) {
    Status s = examples->Next(&pixels, &label);
    if (!s.ok()) {
      CheckNamesFile(s, path);
      break;
    }
    CHECK_EQ(static_cast<int64_t>(pixels.size()), expected.bytes());
  }
  return 0;
}
