#include "common/checkpoint/partial_restore.h"

#include <gtest/gtest.h>

#include "tests/checkpoint/test_util.h"

namespace pstrain {
namespace {

using testing_util::BitwiseEqual;
using testing_util::SmallModel;

// Fresh variables for the same model, all zero; fc2 is shaped for `classes` outputs.
std::map<std::string, Tensor> FreshVariables(int64_t classes = 10) {
  std::map<std::string, Tensor> v;
  for (const auto& [name, tensor] : SmallModel(0).tensors) v[name] = Tensor(tensor.shape());
  v["fc2/weights"] = Tensor(Shape{classes, 8});
  v["fc2/bias"] = Tensor(Shape{classes});
  return v;
}

bool AllZero(const Tensor& t) {
  for (int64_t i = 0; i < t.size(); ++i) {
    if (t[i] != 0.0f) return false;
  }
  return true;
}

TEST(PartialRestore, ExcludingFc2LeavesItUntouchedAndRestoresTheRest) {
  CheckpointData ckpt = SmallModel(500);
  std::map<std::string, Tensor> vars = FreshVariables();
  Tensor fc2_weights = vars["fc2/weights"];  // shares the buffer, as a variable store would
  RestoreFilter filter;
  filter.exclude = {"fc2/"};
  Result<RestoreReport> report = RestoreInto(ckpt, filter, &vars);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(AllZero(fc2_weights));
  EXPECT_TRUE(AllZero(vars["fc2/bias"]));
  for (const char* name :
       {"conv1/weights", "conv1/weights/Adam_m", "conv1/bias", "bn1/moving_mean"}) {
    EXPECT_TRUE(BitwiseEqual(vars[name], ckpt.tensors.at(name))) << name;
  }
  EXPECT_EQ(report->restored, (std::vector<std::string>{"bn1/moving_mean", "conv1/bias",
                                                        "conv1/weights", "conv1/weights/Adam_m"}));
  EXPECT_EQ(report->filtered, (std::vector<std::string>{"fc2/bias", "fc2/weights"}));
  EXPECT_TRUE(report->missing.empty());
  EXPECT_TRUE(report->unused.empty());
}

TEST(PartialRestore, IncludeGlobRestoresOnlyMatchingNames) {
  CheckpointData ckpt = SmallModel(500);
  std::map<std::string, Tensor> vars = FreshVariables();
  RestoreFilter filter;
  filter.include = {"conv*/weights*"};
  filter.exclude = {"*/Adam_*"};
  ASSERT_TRUE(RestoreInto(ckpt, filter, &vars).ok());
  EXPECT_TRUE(BitwiseEqual(vars["conv1/weights"], ckpt.tensors.at("conv1/weights")));
  EXPECT_TRUE(AllZero(vars["conv1/weights/Adam_m"]));
  EXPECT_TRUE(AllZero(vars["conv1/bias"]));
  EXPECT_TRUE(AllZero(vars["bn1/moving_mean"]));
}

TEST(PartialRestore, ShapeMismatchNamesTensorAndBothShapesAndCopiesNothing) {
  CheckpointData ckpt = SmallModel(500);
  std::map<std::string, Tensor> vars = FreshVariables(/*classes=*/5);  // new head: 5 classes
  Result<RestoreReport> report = RestoreInto(ckpt, RestoreFilter(), &vars);
  ASSERT_EQ(report.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(report.status().message(),
            "cannot restore tensor 'fc2/bias': checkpoint has shape [10] but the variable has "
            "shape [5]");
  EXPECT_TRUE(AllZero(vars["conv1/weights"]));  // checked before anything is copied
}

TEST(PartialRestore, ReportsMissingTargetsAndUnusedCheckpointTensors) {
  CheckpointData ckpt = SmallModel(500);
  std::map<std::string, Tensor> vars = FreshVariables();
  vars["conv2/weights"] = Tensor(Shape{2, 2});
  vars.erase("bn1/moving_mean");
  Result<RestoreReport> report = RestoreInto(ckpt, RestoreFilter(), &vars);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->missing, std::vector<std::string>{"conv2/weights"});
  EXPECT_EQ(report->unused, std::vector<std::string>{"bn1/moving_mean"});
  EXPECT_TRUE(AllZero(vars["conv2/weights"]));
}

TEST(RestoreFilterTest, PrefixesAndGlobsMatchAsDocumented) {
  RestoreFilter f;
  f.exclude = {"fc2/", "*Adam_?"};
  EXPECT_TRUE(f.Accepts("fc1/weights"));
  EXPECT_TRUE(f.Accepts("fc20/weights"));  // "fc2/" is a prefix ending at the slash
  EXPECT_FALSE(f.Accepts("fc2/weights"));
  EXPECT_FALSE(f.Accepts("conv1/weights/Adam_m"));
  EXPECT_TRUE(f.Accepts("conv1/weights/Adam_mv"));
}

}  // namespace
}  // namespace pstrain
