// Click-log Examples read by feature name: values, hashing, and every kind of bad record named by
// feature and record index.
#include "common/data/feature_example.h"

#include <gtest/gtest.h>

#include <set>

#include "common/data/example.pb.h"

namespace pstrain {
namespace {

FeatureSchema Schema() {
  auto root = ConfigNode::Parse(R"(input:
  label: clicked
  features:
    - {name: dense, type: float, size: 2}
    - {name: C1, type: int64, max_length: 3}
    - {name: C2, type: int64, hash_buckets: 10}
)",
                                "ctr.yaml");
  auto schema = FeatureSchema::FromConfig(root.value().Child("input").value());
  EXPECT_TRUE(schema.ok()) << schema.status().ToString();
  return schema.value();
}

FeatureExample Valid() {
  FeatureExample e;
  e.floats = {{0.5f, -1.0f}, {}, {}};
  e.ids = {{}, {7, 3}, {123456789012}};
  e.label = 1;
  return e;
}

std::string ErrorOf(const std::string& record, int64_t index = 4) {
  auto parsed = ParseFeatureExample(record, Schema(), index);
  return parsed.ok() ? "OK" : parsed.status().ToString();
}

TEST(FeatureExampleTest, ReadsFloatsIdListsAndTheLabelByName) {
  const FeatureSchema schema = Schema();
  auto parsed = ParseFeatureExample(EncodeFeatureExample(schema, Valid()), schema, 0);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->floats[0], (std::vector<float>{0.5f, -1.0f}));
  EXPECT_EQ(parsed->ids[1], (std::vector<int64_t>{7, 3}));
  ASSERT_EQ(parsed->ids[2].size(), 1u);
  EXPECT_EQ(parsed->ids[2][0], HashId(123456789012, 10));
  EXPECT_EQ(parsed->label, 1);
}

TEST(FeatureExampleTest, HashingSpreadsIdsOverEveryBucket) {
  std::set<int64_t> buckets;
  for (int64_t id = 0; id < 1000; ++id) {
    const int64_t b = HashId(id, 16);
    ASSERT_GE(b, 0);
    ASSERT_LT(b, 16);
    buckets.insert(b);
  }
  EXPECT_EQ(buckets.size(), 16u);
  EXPECT_EQ(HashId(42, 1000), HashId(42, 1000));
}

TEST(FeatureExampleTest, BadRecordsNameTheFeatureAndTheRecord) {
  const FeatureSchema schema = Schema();
  tensorflow::Example proto;
  ASSERT_TRUE(proto.ParseFromString(EncodeFeatureExample(schema, Valid())));
  proto.mutable_features()->mutable_feature()->erase("C1");
  EXPECT_EQ(ErrorOf(proto.SerializeAsString()),
            "InvalidArgument: record 4: feature 'C1' is missing");

  FeatureExample negative = Valid();
  negative.ids[1] = {2, -5};
  EXPECT_EQ(ErrorOf(EncodeFeatureExample(schema, negative)),
            "InvalidArgument: record 4: feature 'C1' holds the negative id -5");

  FeatureExample too_long = Valid();
  too_long.ids[1] = {1, 2, 3, 4};
  EXPECT_EQ(ErrorOf(EncodeFeatureExample(schema, too_long), 9),
            "InvalidArgument: record 9: feature 'C1' has 4 ids, expected 1 to max_length 3");

  FeatureExample short_dense = Valid();
  short_dense.floats[0] = {1.0f};
  EXPECT_EQ(ErrorOf(EncodeFeatureExample(schema, short_dense)),
            "InvalidArgument: record 4: feature 'dense' has 1 floats, expected 2");

  FeatureExample bad_label = Valid();
  bad_label.label = 2;
  EXPECT_NE(ErrorOf(EncodeFeatureExample(schema, bad_label)).find("'clicked' (the label)"),
            std::string::npos);

  proto.Clear();
  ASSERT_TRUE(proto.ParseFromString(EncodeFeatureExample(schema, Valid())));
  (*proto.mutable_features()->mutable_feature())["dense"].mutable_int64_list()->add_value(1);
  EXPECT_EQ(ErrorOf(proto.SerializeAsString()),
            "InvalidArgument: record 4: feature 'dense' is not a float list");
  EXPECT_NE(ErrorOf(std::string("\x0a\x05"
                                "ab"))
                .find("record 4: not a valid tf.train.Example"),
            std::string::npos);
}

TEST(FeatureExampleTest, SchemaErrorsNameTheField) {
  auto error = [](const std::string& features) {
    auto root = ConfigNode::Parse("input:\n  features: " + features + "\n", "ctr.yaml");
    auto schema = FeatureSchema::FromConfig(root.value().Child("input").value());
    return schema.ok() ? std::string("OK") : schema.status().ToString();
  };
  EXPECT_NE(error("[{name: C1, type: string}]").find("must be float or int64, got 'string'"),
            std::string::npos);
  EXPECT_NE(error("[{name: C1, type: int64, max_length: 0}]").find("'max_length' must be >= 1"),
            std::string::npos);
  EXPECT_NE(error("[{name: C1, type: int64}, {name: C1, type: float}]").find("named twice"),
            std::string::npos);
  EXPECT_NE(error("[{name: d, type: float, max_length: 3}]").find("'max_length'"),
            std::string::npos);
  EXPECT_NE(error("[]").find("non-empty"), std::string::npos);
}

}  // namespace
}  // namespace pstrain
