// Image sets as sharded TFRecord files of tf.train.Examples, named as TF names shards
// (`<prefix>-00001-of-00004`).
#pragma once

#include <string>
#include <vector>

#include "common/data/idx.h"
#include "common/data/image_example.h"
#include "common/record_source.h"
#include "common/status.h"

namespace pstrain {

// "<prefix>-00002-of-00004"
std::string ShardPath(const std::string& prefix, int shard, int num_shards);

// Writes `set` as `num_shards` files of contiguous ranges (shard i holds examples
// [i*n/k, (i+1)*n/k)), so reading the shards in order gives back the original order.
// Returns the paths written. `compression` gzip or zlib: each file compressed whole, as
// TFRecordWriter with that compression_type writes it.
Result<std::vector<std::string>> WriteImageShards(const ImageSet& set, const std::string& prefix,
                                                  int num_shards,
                                                  Compression compression = Compression::kNone);

// Reads whole files, in the order given, into memory.
Result<ImageSet> ReadImageShards(const std::vector<std::string>& paths, const ImageShape& expected);

// The files matching a glob pattern, sorted; NotFound naming the pattern when none match.
Result<std::vector<std::string>> MatchFiles(const std::string& pattern);

}  // namespace pstrain
