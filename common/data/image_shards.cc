#include "common/data/image_shards.h"

#include <glob.h>
#include <glog/logging.h>

#include <cstdio>
#include <filesystem>

#include "common/record_io.h"

namespace pstrain {

std::string ShardPath(const std::string& prefix, int shard, int num_shards) {
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), "-%05d-of-%05d", shard, num_shards);
  return prefix + suffix;
}

Result<std::vector<std::string>> WriteImageShards(const ImageSet& set, const std::string& prefix,
                                                  int num_shards, Compression compression) {
  if (num_shards < 1) {
    return InvalidArgument("num_shards is " + std::to_string(num_shards) + ", expected >= 1");
  }
  const ImageShape shape{set.height, set.width, set.channels};
  std::vector<std::string> paths;
  for (int shard = 0; shard < num_shards; ++shard) {
    const int64_t begin = set.count * shard / num_shards;
    const int64_t end = set.count * (shard + 1) / num_shards;
    paths.push_back(ShardPath(prefix, shard, num_shards));
    ASSIGN_OR_RETURN(RecordWriter writer, RecordWriter::Open(paths.back()));
    for (int64_t i = begin; i < end; ++i) {
      RETURN_IF_ERROR(writer.Write(EncodeImageExample(set.image(i), shape, set.labels[i])));
    }
    RETURN_IF_ERROR(writer.Close());
    if (compression != Compression::kNone) {
      const std::string plain = paths.back() + ".uncompressed";
      std::filesystem::rename(paths.back(), plain);
      Status s = CompressFile(plain, paths.back(), compression);
      std::filesystem::remove(plain);
      RETURN_IF_ERROR(s);
    }
    LOG(INFO) << "wrote shard " << shard + 1 << "/" << num_shards << ": " << end - begin
              << " examples to " << paths.back();
  }
  return paths;
}

Result<ImageSet> ReadImageShards(const std::vector<std::string>& paths,
                                 const ImageShape& expected) {
  ImageSet set;
  set.height = expected.height;
  set.width = expected.width;
  set.channels = expected.depth;
  std::string pixels;
  int32_t label = 0;
  for (const std::string& path : paths) {
    ASSIGN_OR_RETURN(ImageExampleReader reader, ImageExampleReader::Open(path, expected));
    while (true) {
      Status s = reader.Next(&pixels, &label);
      if (s.code() == StatusCode::kOutOfRange) break;
      RETURN_IF_ERROR(s);
      set.pixels.insert(set.pixels.end(), pixels.begin(), pixels.end());
      set.labels.push_back(label);
      ++set.count;
    }
  }
  return set;
}

Result<std::vector<std::string>> MatchFiles(const std::string& pattern) {
  glob_t g;
  const int rc = glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> paths;
  if (rc == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) paths.emplace_back(g.gl_pathv[i]);
  }
  globfree(&g);
  if (paths.empty()) return NotFound("no files match '" + pattern + "'");
  return paths;  // glob sorts its matches
}

}  // namespace pstrain
