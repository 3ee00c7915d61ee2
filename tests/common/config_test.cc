#include "common/config.h"

#include <gtest/gtest.h>

namespace pstrain {
namespace {

ConfigNode MustParse(const std::string& text) {
  auto r = ConfigNode::Parse(text, "test.yaml");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.value();
}

TEST(ConfigTest, ReadsFieldsAndDefaults) {
  ConfigNode c = MustParse("a: 3\nb: 0.5\nname: x\nflag: true\nlist: [1, 2, 3]\n");
  EXPECT_EQ(c.GetInt("a").value(), 3);
  EXPECT_DOUBLE_EQ(c.GetDouble("b").value(), 0.5);
  EXPECT_EQ(c.GetString("name").value(), "x");
  EXPECT_TRUE(c.GetBool("flag").value());
  EXPECT_EQ(c.GetIntList("list").value(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(c.GetInt("absent", 9).value(), 9);
}

TEST(ConfigTest, MissingFieldNamesFileAndPath) {
  ConfigNode c = MustParse("model:\n  layers:\n    - {type: conv2d}\n");
  ConfigNode layer = c.Child("model").value().Child("layers").value().At(0);
  Status s = layer.GetInt("filters").status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("test.yaml: model.layers[0]"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("missing field 'filters'"), std::string::npos) << s.message();
}

TEST(ConfigTest, WrongTypeSaysWhatWasExpected) {
  ConfigNode c = MustParse("filters: many\n");
  Status s = c.GetInt("filters").status();
  EXPECT_NE(s.message().find("must be an integer, got 'many'"), std::string::npos) << s.message();
  // Present but malformed is an error even when a default exists.
  EXPECT_FALSE(c.GetInt("filters", 4).ok());
}

TEST(ConfigTest, UnknownKeyIsRefusedWithTheAllowedList) {
  ConfigNode c = MustParse("filtres: 3\n");
  Status s = c.CheckKeys({"filters", "kernel"});
  EXPECT_NE(s.message().find("unknown field 'filtres'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("filters, kernel"), std::string::npos) << s.message();
}

TEST(ConfigTest, BadYamlNamesLine) {
  auto r = ConfigNode::Parse("a: [1, 2\nb: 3\n", "bad.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bad.yaml: not valid YAML at line"), std::string::npos);
}

TEST(ConfigTest, OverrideSetsNestedScalar) {
  ConfigNode c = MustParse("train:\n  batch_size: 128\n");
  ASSERT_TRUE(c.Override("train.batch_size", "64").ok());
  EXPECT_EQ(c.Child("train").value().GetInt("batch_size").value(), 64);
  EXPECT_FALSE(c.Override("nope.x", "1").ok());
}

TEST(ConfigTest, MissingFileIsNotFound) {
  auto r = ConfigNode::LoadFile("/nonexistent/x.yaml");
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace pstrain
