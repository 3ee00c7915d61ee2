// TensorFlow's checkpoint files (the V2 "tensor bundle", tensorflow/core/util/tensor_bundle/),
// so TensorFlow reads what pstrain trained and pstrain starts from what TensorFlow trained:
//   <prefix>.index                    an SSTable (sstable.h): key "" -> BundleHeaderProto
//                                     {num_shards, endianness LITTLE, version}; each tensor's
//                                     name -> BundleEntryProto {dtype, shape, shard_id, offset,
//                                     size, masked CRC-32C of its bytes}
//   <prefix>.data-00000-of-00001      the tensors' raw little-endian bytes, one after another
// This file knows the format only; which names and layouts TensorFlow's variables have is
// tf_checkpoint.h's business. Writes one data shard; reads any number of them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace pstrain {

// TensorFlow's DataType numbers for the two types pstrain's checkpoints hold.
enum class TfDtype : int { kFloat = 1, kInt64 = 9 };

struct BundleTensor {
  TfDtype dtype = TfDtype::kFloat;
  std::vector<int64_t> shape;
  std::string data;  // the elements, little-endian, row-major
};

struct Bundle {
  std::map<std::string, BundleTensor> tensors;
  // Tensors of other types (strings such as TF 2's object graph, doubles, ...): named, not read.
  std::vector<std::string> skipped;
};

// "<prefix>.index"; "<prefix>.data-<shard>-of-<num_shards>" (five digits each).
std::string BundleIndexPath(const std::string& prefix);
std::string BundleDataPath(const std::string& prefix, int shard, int num_shards);
// Whether `prefix` names a bundle: its .index file exists.
bool IsTfBundle(const std::string& prefix);

// Writes the data file and then the index, each atomically (the index appears last, so an index
// never names missing data). InvalidArgument naming a tensor whose bytes do not match its shape.
Status WriteTfBundle(const std::string& prefix, const std::map<std::string, BundleTensor>& tensors);

// NotFound when <prefix>.index does not exist; DataLoss naming the .index or .data file and the
// tensor when either is damaged (a bad table, entry, size or checksum); InvalidArgument naming the
// tensor for what pstrain cannot read (sliced variables, big-endian bundles).
Result<Bundle> ReadTfBundle(const std::string& prefix);

}  // namespace pstrain
