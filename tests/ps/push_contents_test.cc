// A push's contents are checked whole (ps/push_contents.h): split into gradients and values to
// assign, each variable named once and pushed as the kind it was pushed as before; a refused push
// notes nothing.
#include "ps/push_contents.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/ps/sgd_store.h"

namespace pstrain {
namespace ps {
namespace {

using wire::Message;

Message Push(float w, bool with_mean, bool mean_assigned = true) {
  Message m;
  m.type = wire::MessageType::kPush;
  m.tensors.push_back({"w", Tensor::Filled(Shape{4}, w)});
  if (with_mean) {
    m.tensors.push_back({"bn/mean", Tensor::Filled(Shape{2}, 0.5f)});
    if (mean_assigned) m.assigns = {"bn/mean"};
  }
  return m;
}

TEST(PushContentsTest, SplitsGradientsFromValuesAndReadsTheLargestExponent) {
  auto store = SgdStoreWithWAndMean();
  PushKinds kinds;
  Message push = Push(0.0f, true);
  push.tensors[0].tensor[2] = -3.0f;  // 2^1 <= 3 < 2^2: biased exponent 128
  Result<PushContents> c = kinds.Check(*store, push);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->gradients.size(), 1u);
  EXPECT_EQ(c->gradients[0].first, "w");
  ASSERT_EQ(c->assigns.size(), 1u);
  EXPECT_EQ(c->assigns[0].first, "bn/mean");
  EXPECT_EQ(c->largest_exponent, 128u) << "of the gradients only, not the assigned 0.5";
  EXPECT_EQ(kinds.Check(*store, Push(0.0f, false))->largest_exponent, 0u) << "all zero";
}

TEST(PushContentsTest, AVariableNamedTwiceOrOfAnotherKindIsRefusedAndNotedNothing) {
  auto store = SgdStoreWithWAndMean();
  PushKinds kinds;
  Message twice = Push(1.0f, false);
  twice.tensors.push_back({"w", Tensor::Filled(Shape{4}, 1.0f)});
  EXPECT_NE(kinds.Check(*store, twice).status().message().find("names variable 'w' twice"),
            std::string::npos);
  // A refused push noted nothing: bn/mean may still come as a gradient first.
  Message nan = Push(NAN, true, /*mean_assigned=*/true);
  EXPECT_FALSE(kinds.Check(*store, nan).ok());
  ASSERT_TRUE(kinds.Check(*store, Push(1.0f, true, /*mean_assigned=*/false)).ok());
  // From now on it is a gradient: sent as a value, it is refused naming both kinds.
  Result<PushContents> changed = kinds.Check(*store, Push(1.0f, true, /*mean_assigned=*/true));
  ASSERT_FALSE(changed.ok());
  EXPECT_NE(changed.status().message().find(
                "variable 'bn/mean' was pushed as a gradient before; this push sends it as a "
                "value to assign"),
            std::string::npos)
      << changed.status().message();
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
