#include "common/enum_names.h"

#include <gtest/gtest.h>

namespace pstrain {
namespace {

enum class Colour { kRed, kGreen, kBlue, kUnlisted };

constexpr EnumName<Colour> kColours[] = {
    {Colour::kRed, "red"}, {Colour::kGreen, "green"}, {Colour::kBlue, "blue"}};

TEST(EnumNamesTest, EveryListedValueReadsBackFromItsName) {
  for (const EnumName<Colour>& entry : kColours) {
    Result<Colour> parsed = ValueNamed(kColours, NameOf(kColours, entry.value), "--colour");
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(*parsed, entry.value);
  }
}

TEST(EnumNamesTest, AnUnlistedValueGetsTheGivenFallbackName) {
  EXPECT_STREQ(NameOf(kColours, Colour::kUnlisted), "unknown");
  EXPECT_STREQ(NameOf(kColours, Colour::kUnlisted, "?"), "?");
}

TEST(EnumNamesTest, ABadNameIsRefusedNamingTheSettingAndEveryAcceptedName) {
  Result<Colour> bad = ValueNamed(kColours, "Red", "--colour");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "--colour must be red, green or blue, got 'Red'");
}

TEST(EnumNamesTest, TheAcceptedNamesReadAsAList) {
  constexpr EnumName<Colour> kOne[] = {{Colour::kRed, "red"}};
  constexpr EnumName<Colour> kTwo[] = {{Colour::kRed, "red"}, {Colour::kBlue, "blue"}};
  EXPECT_EQ(NamesOf(kOne), "red");
  EXPECT_EQ(NamesOf(kTwo), "red or blue");
  EXPECT_EQ(NamesOf(kColours), "red, green or blue");
}

}  // namespace
}  // namespace pstrain
