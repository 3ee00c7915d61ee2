#include "worker/training/model_health.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace pstrain {
namespace worker {
namespace {

TEST(ModelHealthTest, AFiniteModelPassesAndOneNonFiniteValueFailsNamingItsVariable) {
  Variable a{"conv1/weights", Tensor::Filled(Shape{3, 4}, 1.0f)};
  Variable b{"fc/bias", Tensor::Filled(Shape{5}, -2.0f)};
  b.value[4] = std::numeric_limits<float>::max();  // large is still finite
  std::vector<Variable*> model{&a, &b};
  EXPECT_TRUE(CheckModelFinite(model, 7).ok());
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    b.value[2] = bad;
    Status s = CheckModelFinite(model, 7);
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << bad;
    EXPECT_NE(s.message().find("'fc/bias' holds 1 NaN or Inf of 5 values at global step 7"),
              std::string::npos)
        << s.message();
    b.value[2] = 0.0f;
  }
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
