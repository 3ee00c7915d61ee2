// Writes a synthetic click log (common/data/synthetic_clicks.h) as TFRecord files of
// tf.train.Examples, and the best AUC and log loss any model can reach on its test split,
// computed from the hidden model's own click probabilities.
//   pstrain-synth-ctr --out_dir=data/ctr --train_examples=20000 --test_examples=5000
// writes data/ctr/train.tfrecord, data/ctr/test.tfrecord and data/ctr/best.json.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/binary_metrics.h"
#include "common/checkpoint/atomic_file.h"
#include "common/data/synthetic_clicks.h"
#include "common/record_io.h"
#include "tools/tool_main.h"

DEFINE_string(out_dir, "", "Where train.tfrecord, test.tfrecord and best.json go");
DEFINE_int64(train_examples, 20000, "Examples in train.tfrecord");
DEFINE_int64(test_examples, 5000, "Examples in test.tfrecord");
DEFINE_int64(dense, 13, "Dense float features (the float feature 'dense')");
DEFINE_int64(categorical, 26, "Categorical id features ('C1'..'Cn', one id each)");
DEFINE_int64(vocabulary, 10000, "Distinct ids per categorical feature");
DEFINE_double(zipf_exponent, 1.1, "Id rank r is drawn with probability ~ 1 / (r + 1)^exponent");
DEFINE_double(bias, -1.5, "The hidden model's bias (sets the click rate)");
DEFINE_double(dense_weight_stddev, 0.3, "Standard deviation of the hidden dense weights");
DEFINE_double(id_weight_stddev, 0.5, "Standard deviation of the hidden per-id weights");
DEFINE_uint64(seed, 1, "Seed of the hidden model and the examples");

namespace pstrain {
namespace {

// Writes `n` examples to `path`; the hidden probabilities and labels go to the vectors.
Status WriteSplit(SyntheticClicks* clicks, const FeatureSchema& schema, int64_t n,
                  const std::string& path, std::vector<double>* probabilities,
                  std::vector<int32_t>* labels) {
  ASSIGN_OR_RETURN(RecordWriter writer, RecordWriter::Open(path));
  for (int64_t i = 0; i < n; ++i) {
    double p = 0.0;
    const FeatureExample e = clicks->Next(&p);
    RETURN_IF_ERROR(writer.Write(EncodeFeatureExample(schema, e)));
    probabilities->push_back(p);
    labels->push_back(e.label);
  }
  return writer.Close();
}

Status Generate() {
  if (FLAGS_out_dir.empty()) return InvalidArgument("--out_dir is required");
  if (FLAGS_train_examples < 1 || FLAGS_test_examples < 2) {
    return InvalidArgument("--train_examples must be >= 1 and --test_examples >= 2");
  }
  SyntheticClickOptions options;
  options.dense = FLAGS_dense;
  options.categorical = FLAGS_categorical;
  options.vocabulary = FLAGS_vocabulary;
  options.zipf_exponent = FLAGS_zipf_exponent;
  options.bias = FLAGS_bias;
  options.dense_weight_stddev = FLAGS_dense_weight_stddev;
  options.id_weight_stddev = FLAGS_id_weight_stddev;
  options.seed = FLAGS_seed;
  RETURN_IF_ERROR(options.Validate());
  std::filesystem::create_directories(FLAGS_out_dir);
  SyntheticClicks clicks(options);
  const FeatureSchema schema = clicks.Schema();
  std::vector<double> p;
  std::vector<int32_t> y;
  RETURN_IF_ERROR(
      WriteSplit(&clicks, schema, FLAGS_train_examples, FLAGS_out_dir + "/train.tfrecord", &p, &y));
  p.clear();
  y.clear();
  RETURN_IF_ERROR(
      WriteSplit(&clicks, schema, FLAGS_test_examples, FLAGS_out_dir + "/test.tfrecord", &p, &y));
  ASSIGN_OR_RETURN(double auc, RocAuc(p, y));
  int64_t clicked = 0;
  for (int32_t label : y) clicked += label;
  char json[256];
  std::snprintf(json, sizeof(json),
                "{\"auc\": %.6f, \"log_loss\": %.6f, \"positive_rate\": %.6f, "
                "\"test_examples\": %lld}\n",
                auc, LogLoss(p, y), static_cast<double>(clicked) / static_cast<double>(y.size()),
                static_cast<long long>(y.size()));
  RETURN_IF_ERROR(WriteFileAtomically(FLAGS_out_dir + "/best.json", json));
  std::printf("best achievable on the test split: %s", json);
  return Status::OK();
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) {
  return pstrain::RunTool(argc, argv,
                          "Writes a synthetic click log and the best AUC a model can reach on it",
                          "tools/synth_ctr_main.cc", pstrain::Generate);
}
