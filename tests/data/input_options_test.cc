#include "worker/training/input/input_options.h"

#include <gtest/gtest.h>

namespace pstrain {
namespace {

Result<InputOptions> FromYaml(const std::string& yaml) {
  auto root = ConfigNode::Parse(yaml, "train.yaml");
  EXPECT_TRUE(root.ok()) << root.status().ToString();
  auto input = root->Child("input");
  EXPECT_TRUE(input.ok());
  return InputOptions::FromConfig(*input);
}

TEST(InputOptionsTest, ReadsTheInputSection) {
  auto o = FromYaml(R"(
input:
  source: tfrecord
  data_dir: /data/fmnist
  tfrecord_pattern: data/fmnist-train-*
  test_tfrecord_pattern: data/fmnist-test-*
  shuffle_capacity: 2000
  min_after_dequeue: 1000
  prefetch_batches: 8
  threads: 2
  random_flip: true
  random_crop_padding: 4
  mean: [0.286]
  std: [0.353]
)");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->source, InputSource::kTfRecord);
  EXPECT_EQ(o->data_dir, "/data/fmnist");
  EXPECT_EQ(o->tfrecord_pattern, "data/fmnist-train-*");
  EXPECT_EQ(o->test_tfrecord_pattern, "data/fmnist-test-*");
  EXPECT_EQ(o->shuffle_capacity, 2000);
  EXPECT_EQ(o->min_after_dequeue, 1000);
  EXPECT_EQ(o->prefetch_batches, 8);
  EXPECT_EQ(o->threads, 2);
  EXPECT_TRUE(o->random_flip);
  EXPECT_EQ(o->random_crop_padding, 4);
  EXPECT_EQ(o->mean, std::vector<float>{0.286f});
  EXPECT_EQ(o->stddev, std::vector<float>{0.353f});
}

TEST(InputOptionsTest, AbsentFieldsKeepTheDefaults) {
  auto o = FromYaml("input:\n  source: idx\n");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->data_dir, "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(o->shuffle_capacity, 10000);
  EXPECT_EQ(o->min_after_dequeue, 5000);
  EXPECT_EQ(o->prefetch_batches, 4);
  EXPECT_TRUE(o->mean.empty());
}

TEST(InputOptionsTest, MistakesAreErrorsNamingTheField) {
  auto expect_error = [](const std::string& yaml, const std::string& part) {
    Status s = FromYaml(yaml).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << yaml;
    EXPECT_NE(s.message().find(part), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("train.yaml: input"), std::string::npos) << s.message();
  };
  expect_error("input:\n  shufle_capacity: 10\n", "unknown field 'shufle_capacity'");
  expect_error("input:\n  source: lmdb\n", "source 'lmdb' is not known");
  expect_error("input:\n  source: tfrecord\n", "tfrecord_pattern is empty");
  expect_error("input:\n  shuffle_capacity: 100\n  min_after_dequeue: 100\n",
               "shuffle_capacity (100) must be greater than min_after_dequeue (100)");
  expect_error("input:\n  threads: 0\n", "threads must be in 1..64");
  expect_error("input:\n  std: [0]\n", "std values must be > 0");
  expect_error("input:\n  resize: bicubic\n", "resize 'bicubic' is not known");
  expect_error("input:\n  image_feature: ''\n", "feature names must not be empty");
  expect_error("input:\n  augment: {random_flip: true}\n", "unknown field 'random_flip'");
  expect_error("input:\n  augment: {pad_crop: -1}\n", "pad_crop must be in 0..1024");
  expect_error("input:\n  augment: {flip: true}\n  random_flip: true\n", "not both");
}

TEST(InputOptionsTest, ReadsEncodedImageFeaturesResizeAndAugment) {
  auto o = FromYaml(R"(
input:
  source: tfrecord
  tfrecord_pattern: imagenet/train-*
  image_feature: jpeg
  raw_image_feature: pixels
  label_feature: class
  label_offset: 1
  resize: center_crop
  augment: {pad_crop: 4, flip: true}
  mean: [0.485, 0.456, 0.406]
  std: [0.229, 0.224, 0.225]
)");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->features.image, "jpeg");
  EXPECT_EQ(o->features.raw_image, "pixels");
  EXPECT_EQ(o->features.label, "class");
  EXPECT_EQ(o->features.label_offset, 1);
  EXPECT_EQ(o->resize, ResizeMethod::kCenterCrop);
  EXPECT_TRUE(o->random_flip);
  EXPECT_EQ(o->random_crop_padding, 4);
  EXPECT_EQ(o->mean.size(), 3u);
}

TEST(InputOptionsTest, FeatureDefaultsAreTensorFlows) {
  auto o = FromYaml("input:\n  source: tfrecord\n  tfrecord_pattern: x-*\n");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->features.image, "image/encoded");
  EXPECT_EQ(o->features.label, "image/class/label");
  EXPECT_EQ(o->features.label_offset, 0);
  EXPECT_EQ(o->resize, ResizeMethod::kNone);
  EXPECT_FALSE(o->random_flip);
  EXPECT_EQ(o->random_crop_padding, 0);
}

TEST(InputOptionsTest, EvaluationReadsTheTestSplitOnceInOrder) {
  InputOptions train;
  train.random_flip = true;
  train.random_crop_padding = 4;
  train.tfrecord_files = {"train-0"};
  InputOptions eval = train.ForEvaluation();
  EXPECT_EQ(eval.split, Split::kTest);
  EXPECT_FALSE(eval.shuffle);
  EXPECT_FALSE(eval.drop_remainder);
  EXPECT_EQ(eval.num_epochs, 1);
  EXPECT_FALSE(eval.random_flip);
  EXPECT_EQ(eval.random_crop_padding, 0);
  EXPECT_TRUE(eval.tfrecord_files.empty());
}

}  // namespace
}  // namespace pstrain
