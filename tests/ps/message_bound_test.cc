#include "ps/message_bound.h"

#include <gtest/gtest.h>

namespace pstrain {
namespace ps {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

MessageSources Sources() {
  MessageSources s;
  s.variable_bytes = 40 * kMiB;
  s.optimizer_slots = 2;  // adam
  s.header_bytes = kMiB;
  s.max_message_bytes = uint64_t{4096} * kMiB;
  return s;
}

TEST(MessageBoundTest, AClientMayPushEveryVariableWithHeadroomAndNoMore) {
  const MessageBound b = BoundMessages(Sources());
  EXPECT_GE(b.client_bytes, 40 * kMiB + kMiB) << "a push of every variable and its header";
  EXPECT_LE(b.client_bytes, 40 * kMiB * 2);
  EXPECT_EQ(b.server_bytes, b.client_bytes) << "no replicas: no server sends anything larger";
  EXPECT_NE(b.client_from.find("a push of every variable: 41943040 B"), std::string::npos)
      << b.client_from;
}

TEST(MessageBoundTest, WithReplicasAServerMaySendACopyOfTheVariablesWithTheirSlots) {
  MessageSources s = Sources();
  s.replicated = true;
  const MessageBound b = BoundMessages(s);
  EXPECT_GE(b.server_bytes, 3 * 40 * kMiB + kMiB) << "values and two slots";
  EXPECT_LE(b.server_bytes, 2 * 3 * 40 * kMiB);
  EXPECT_LT(b.client_bytes, 3 * 40 * kMiB) << "a client's bound stays a push's";
  EXPECT_NE(b.server_from.find("replica copy"), std::string::npos) << b.server_from;
}

TEST(MessageBoundTest, ATablesLargestRowPushAndItsRowsInACopyCount) {
  MessageSources s = Sources();
  s.variable_bytes = 1024;
  s.replicated = true;
  s.tables.push_back({"C1", /*dimension=*/16, /*max_rows=*/1 << 20, /*slots=*/1});
  const MessageBound b = BoundMessages(s);
  const uint64_t push = (uint64_t{1} << 20) * (8 + 16 * 4);  // ids and rows
  const uint64_t copy = (uint64_t{1} << 20) * (8 + 16 * 4 * 2) + 2 * 1024;
  EXPECT_GE(b.client_bytes, push);
  EXPECT_LT(b.client_bytes, copy);
  EXPECT_NE(b.client_from.find("a row push of table C1's max_rows"), std::string::npos)
      << b.client_from;
  EXPECT_GE(b.server_bytes, copy);
}

TEST(MessageBoundTest, MaxMessageMbCapsBothBoundsAndIsNamed) {
  MessageSources s = Sources();
  s.replicated = true;
  s.max_message_bytes = 16 * kMiB;
  const MessageBound b = BoundMessages(s);
  EXPECT_EQ(b.client_bytes, 16 * kMiB);
  EXPECT_EQ(b.server_bytes, 16 * kMiB);
  EXPECT_NE(b.client_from.find("--max_message_mb"), std::string::npos) << b.client_from;
  EXPECT_NE(DescribeBound(b).find("a client's messages up to 16 MiB"), std::string::npos)
      << DescribeBound(b);
}

TEST(MessageBoundTest, ASmallModelStillGetsRoomForHeadersAndUses) {
  MessageSources s = Sources();
  s.variable_bytes = 40;
  const MessageBound b = BoundMessages(s);
  EXPECT_GE(b.client_bytes, 16 * kMiB);
  EXPECT_LT(b.client_bytes, 32 * kMiB) << "far below the default --max_message_mb";
}

TEST(MessageBoundTest, ConfigGivesTheOptimizersSlotsAndTheTables) {
  auto config = ConfigNode::Parse(
      "train: {optimizer: {type: adam}, learning_rate: {initial: 0.1}}\n"
      "tables:\n"
      "  optimizer: {type: adagrad}\n"
      "  learning_rate: {initial: 0.05}\n"
      "  list:\n"
      "    - {name: C1, dimension: 8, max_rows: 1000}\n",
      "test.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto s = ReadMessageSources(*config, 4096, /*max_table_rows=*/100);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->variable_bytes, 4096);
  EXPECT_EQ(s->optimizer_slots, 2);
  ASSERT_EQ(s->tables.size(), 1u);
  EXPECT_EQ(s->tables[0].name, "C1");
  EXPECT_EQ(s->tables[0].dimension, 8);
  EXPECT_EQ(s->tables[0].max_rows, 100) << "--max_table_rows caps the config's";
  EXPECT_EQ(s->tables[0].slots, 1);
}

TEST(MessageBoundTest, AConfigWithoutTrainIsRefusedNamingIt) {
  auto config = ConfigNode::Parse("model: {name: m}\n", "test.yaml");
  ASSERT_TRUE(config.ok());
  auto s = ReadMessageSources(*config, 0, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("train"), std::string::npos) << s.status().ToString();
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
