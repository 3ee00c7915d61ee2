// Converts Fashion-MNIST IDX files into sharded TFRecord files of tf.train.Examples.
//   pstrain-idx2tfrecord --data_dir=/usr/share/datasets/fashion-mnist --split=train
//       --output_prefix=data/fmnist-train --num_shards=4
#include <gflags/gflags.h>
#include <glog/logging.h>

#include "common/data/idx.h"
#include "common/data/image_shards.h"
#include "common/record_source.h"
#include "tools/tool_main.h"

DEFINE_string(data_dir, "/usr/share/datasets/fashion-mnist",
              "Directory with {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]");
DEFINE_string(split, "train", "train or test");
DEFINE_string(output_prefix, "", "Shards are written to <prefix>-NNNNN-of-NNNNN");
DEFINE_int32(num_shards, 4, "Number of output files");
DEFINE_string(compression, "none",
              "none, gzip or zlib: each file compressed whole, as TFRecordWriter with that "
              "compression_type writes it");

namespace pstrain {
namespace {

Status Convert() {
  if (FLAGS_output_prefix.empty()) return InvalidArgument("--output_prefix is required");
  ASSIGN_OR_RETURN(Split split, ParseSplit(FLAGS_split));
  Result<Compression> compression = CompressionNamed(FLAGS_compression);
  if (!compression.ok() || *compression == Compression::kAuto) {
    return InvalidArgument("--compression=" + FLAGS_compression + ": expected none, gzip or zlib");
  }
  ASSIGN_OR_RETURN(ImageSet set, LoadFashionMnist(FLAGS_data_dir, split));
  LOG(INFO) << "read " << set.count << " " << SplitName(split) << " images from " << FLAGS_data_dir;
  ASSIGN_OR_RETURN(std::vector<std::string> paths,
                   WriteImageShards(set, FLAGS_output_prefix, FLAGS_num_shards, *compression));
  LOG(INFO) << "wrote " << set.count << " examples in " << paths.size() << " shards";
  return Status::OK();
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) {
  return pstrain::RunTool(argc, argv, "Converts Fashion-MNIST IDX files to sharded TFRecord files",
                          "tools/idx2tfrecord_main.cc", pstrain::Convert);
}
