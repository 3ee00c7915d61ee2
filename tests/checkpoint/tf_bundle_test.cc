// TensorFlow's tensor bundle, layer by layer: protobuf varints, LevelDB's table (sstable.h), the
// bundle files (tf_bundle.h) and TF-1's names and layouts (tf_checkpoint.h), each checked on
// bytes it wrote and on damaged copies; TensorFlow itself reads them in tf_interop_test.cc.
#include "common/checkpoint/tf_bundle.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "common/checkpoint/checkpoint_index.h"
#include "common/checkpoint/checkpoint_manager.h"
#include "common/checkpoint/cluster_checkpoint.h"
#include "common/checkpoint/joined_checkpoint.h"
#include "common/checkpoint/proto_wire.h"
#include "common/checkpoint/sstable.h"
#include "common/checkpoint/tf_checkpoint.h"
#include "common/crc32c.h"
#include "common/little_endian.h"
#include "tests/checkpoint/test_util.h"

namespace pstrain {
namespace {

using testing_util::BitwiseEqual;
using testing_util::Pattern;
using testing_util::ReadBytes;
using testing_util::ScratchDirTest;
using testing_util::WriteBytes;

bool Contains(const Status& st, const std::string& text) {
  return st.message().find(text) != std::string::npos;
}

TEST(ProtoWireTest, VarintsRoundTripAtEveryLengthAndATruncatedOneFails) {
  for (uint64_t v : {0ull, 1ull, 127ull, 128ull, 300ull, 1ull << 35, ~0ull}) {
    std::string s;
    proto_wire::PutVarint(&s, v);
    std::string_view in = s;
    uint64_t back = 0;
    ASSERT_TRUE(proto_wire::GetVarint(&in, &back)) << v;
    EXPECT_EQ(back, v);
    EXPECT_TRUE(in.empty());
    std::string_view cut(s.data(), s.size() - 1);
    EXPECT_EQ(proto_wire::GetVarint(&cut, &back), false) << v;
  }
  std::string s;
  proto_wire::PutVarint(&s, 300);
  EXPECT_EQ(s, "\xac\x02");  // protobuf's documented encoding of 300
}

TEST(ProtoWireTest, FieldsReadBackAndALengthPastTheEndIsMalformed) {
  std::string m;
  proto_wire::PutVarintField(&m, 1, 9);
  proto_wire::PutBytesField(&m, 2, "abc");
  proto_wire::PutFixed32Field(&m, 6, 0xdeadbeef);
  proto_wire::FieldReader r(m);
  proto_wire::Field f;
  ASSERT_TRUE(r.Next(&f));
  EXPECT_EQ(f.field, 1);
  EXPECT_EQ(f.number, 9u);
  ASSERT_TRUE(r.Next(&f));
  EXPECT_EQ(f.bytes, "abc");
  ASSERT_TRUE(r.Next(&f));
  EXPECT_EQ(f.number, 0xdeadbeefu);
  EXPECT_FALSE(r.Next(&f));
  EXPECT_TRUE(r.ok());
  proto_wire::FieldReader bad(std::string_view(m.data(), 4));  // cuts "abc" short
  while (bad.Next(&f)) {
  }
  EXPECT_FALSE(bad.ok());
}

TableEntries ManyEntries(int n) {
  TableEntries e;
  for (int i = 0; i < n; ++i) {
    char key[32];
    std::snprintf(key, sizeof(key), "layer%04d/weights", i);
    e.emplace_back(key, std::string(static_cast<size_t>(i % 7), static_cast<char>('a' + i % 26)));
  }
  return e;
}

TEST(SSTableTest, EntriesRoundTripAcrossManyBlocksWithSharedPrefixesCompressed) {
  const TableEntries entries = ManyEntries(500);
  auto table = BuildTable(entries, /*block_size=*/256);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  size_t raw = 0;
  for (const auto& [k, v] : entries) raw += k.size() + v.size();
  EXPECT_LT(table->size(), raw) << "keys sharing 'layer0' are stored once per restart";
  EXPECT_EQ(little_endian::Get64(table->data() + table->size() - 8), 0xdb4775248b80fb57ull);
  auto back = ReadTable(*table, "t.index");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, entries);
}

TEST(SSTableTest, KeysOutOfOrderAreRefusedNamingThem) {
  auto table = BuildTable({{"b", "1"}, {"a", "2"}});
  ASSERT_FALSE(table.ok());
  EXPECT_TRUE(Contains(table.status(), "'a' after 'b'")) << table.status().ToString();
}

TEST(SSTableTest, EveryFlippedByteIsDataLossNamingTheFile) {
  auto table = BuildTable(ManyEntries(40), 128);
  ASSERT_TRUE(table.ok());
  for (size_t i = 0; i < table->size(); ++i) {
    std::string bad = *table;
    bad[i] ^= 0x10;
    auto read = ReadTable(bad, "/d/model.ckpt-5.index");
    if (read.ok()) {  // only the footer's zero padding is covered by no check
      EXPECT_GE(i, table->size() - 48) << "byte " << i;
      continue;
    }
    EXPECT_EQ(read.status().code(), StatusCode::kDataLoss) << i;
    EXPECT_TRUE(Contains(read.status(), "/d/model.ckpt-5.index")) << read.status().ToString();
  }
  auto cut = ReadTable(table->substr(0, 30), "x.index");
  EXPECT_TRUE(Contains(cut.status(), "too short")) << cut.status().ToString();
}

class TfBundleTest : public ScratchDirTest {};

std::map<std::string, BundleTensor> SomeTensors() {
  std::map<std::string, BundleTensor> m;
  Tensor w = Pattern(Shape{3, 2}, 1.0f);
  m["w"] = {
      TfDtype::kFloat, {3, 2}, std::string(reinterpret_cast<const char*>(w.data()), w.bytes())};
  const int64_t step = 77;
  m["global_step"] = {TfDtype::kInt64, {}, std::string(reinterpret_cast<const char*>(&step), 8)};
  m["empty"] = {TfDtype::kFloat, {0, 4}, ""};
  return m;
}

TEST_F(TfBundleTest, TensorsRoundTripWithTheirTypesShapesAndBytes) {
  const std::string prefix = Path("model.ckpt-77");
  ASSERT_TRUE(WriteTfBundle(prefix, SomeTensors()).ok());
  EXPECT_TRUE(IsTfBundle(prefix));
  EXPECT_TRUE(std::filesystem::exists(prefix + ".data-00000-of-00001"));
  auto back = ReadTfBundle(prefix);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->tensors.size(), 3u);
  for (const auto& [name, t] : SomeTensors()) {
    const BundleTensor& b = back->tensors.at(name);
    EXPECT_EQ(b.dtype, t.dtype) << name;
    EXPECT_EQ(b.shape, t.shape) << name;
    EXPECT_EQ(b.data, t.data) << name;
  }
}

TEST_F(TfBundleTest, EntriesCarryTensorFlowsMaskedCrc32cOfTheBytes) {
  const std::string prefix = Path("m");
  ASSERT_TRUE(WriteTfBundle(prefix, SomeTensors()).ok());
  auto table = ReadTable(ReadBytes(prefix + ".index"), "m.index");
  ASSERT_TRUE(table.ok());
  const std::string bytes = SomeTensors()["w"].data;
  const uint32_t masked = crc32c::Mask(crc32c::Value(bytes.data(), bytes.size()));
  bool found = false;
  for (const auto& [key, value] : *table) {
    if (key != "w") continue;
    proto_wire::FieldReader r(value);
    proto_wire::Field f;
    while (r.Next(&f)) found |= f.field == 6 && f.wire_type == 5 && f.number == masked;
  }
  EXPECT_TRUE(found) << "entry 'w' has no fixed32 field 6 equal to the masked CRC";
  // The header: num_shards 1 and version.producer 1.
  EXPECT_EQ((*table)[0].first, "");
  EXPECT_EQ((*table)[0].second, std::string("\x08\x01\x1a\x02\x08\x01", 6));
}

TEST_F(TfBundleTest, ADamagedDataFileIsDataLossNamingItAndTheTensor) {
  const std::string prefix = Path("m");
  ASSERT_TRUE(WriteTfBundle(prefix, SomeTensors()).ok());
  const std::string data_path = prefix + ".data-00000-of-00001";
  std::string data = ReadBytes(data_path);
  data[data.size() - 3] ^= 1;  // in "w", the last tensor in key order
  WriteBytes(data_path, data);
  auto read = ReadTfBundle(prefix);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(read.status(), data_path)) << read.status().ToString();
  EXPECT_TRUE(Contains(read.status(), "checksum mismatch in tensor 'w'"))
      << read.status().ToString();
  WriteBytes(data_path, data.substr(0, 10));
  read = ReadTfBundle(prefix);
  EXPECT_TRUE(Contains(read.status(), data_path + ": truncated")) << read.status().ToString();
  std::filesystem::remove(data_path);
  read = ReadTfBundle(prefix);
  EXPECT_TRUE(Contains(read.status(), data_path)) << read.status().ToString();
}

TEST_F(TfBundleTest, ADamagedIndexIsDataLossNamingIt) {
  const std::string prefix = Path("m");
  ASSERT_TRUE(WriteTfBundle(prefix, SomeTensors()).ok());
  std::string index = ReadBytes(prefix + ".index");
  index[5] ^= 0x40;
  WriteBytes(prefix + ".index", index);
  auto read = ReadTfBundle(prefix);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(read.status(), prefix + ".index")) << read.status().ToString();
}

// A conv kernel [out=2, in=3, kh=2, kw=2], a dense one [units=3, features=2], Adam's slots.
CheckpointData Trained(int64_t step) {
  CheckpointData d;
  d.global_step = step;
  d.tensors["conv1/weights"] = Pattern(Shape{2, 3, 2, 2}, 1.0f);
  d.tensors["conv1/weights/m"] = Pattern(Shape{2, 3, 2, 2}, 2.0f);
  d.tensors["conv1/weights/v"] = Pattern(Shape{2, 3, 2, 2}, 3.0f);
  d.tensors["conv1/bias"] = Pattern(Shape{2}, 4.0f);
  d.tensors["fc1/weights"] = Pattern(Shape{3, 2}, 5.0f);
  return d;
}

float FloatAt(const BundleTensor& t, size_t i) {
  float f;
  std::memcpy(&f, t.data.data() + 4 * i, 4);
  return f;
}

TEST_F(TfBundleTest, TensorFlowNamesAndLayoutsAreWrittenAndReadBack) {
  const std::string prefix = Path("model.ckpt-41");
  const CheckpointData d = Trained(41);
  TfExportOptions options;
  options.adam_beta1 = 0.5;
  ASSERT_TRUE(WriteTfCheckpoint(prefix, d, options).ok());
  auto bundle = ReadTfBundle(prefix);
  ASSERT_TRUE(bundle.ok()) << bundle.status().ToString();
  std::vector<std::string> names;
  for (const auto& [name, t] : bundle->tensors) names.push_back(name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"beta1_power", "beta2_power", "conv1/bias", "conv1/weights",
                                      "conv1/weights/Adam", "conv1/weights/Adam_1", "fc1/weights",
                                      "global_step"}));
  const BundleTensor& conv = bundle->tensors.at("conv1/weights");
  EXPECT_EQ(conv.shape, (std::vector<int64_t>{2, 2, 3, 2}));  // HWIO
  const Tensor& ours = d.tensors.at("conv1/weights");
  for (int o = 0; o < 2; ++o)
    for (int i = 0; i < 3; ++i)
      for (int h = 0; h < 2; ++h)
        for (int w = 0; w < 2; ++w) {
          EXPECT_EQ(FloatAt(conv, ((h * 2 + w) * 3 + i) * 2 + o),
                    ours[((o * 3 + i) * 2 + h) * 2 + w]);
        }
  const BundleTensor& fc = bundle->tensors.at("fc1/weights");
  EXPECT_EQ(fc.shape, (std::vector<int64_t>{2, 3}));  // [features, units]
  for (int u = 0; u < 3; ++u)
    for (int f = 0; f < 2; ++f)
      EXPECT_EQ(FloatAt(fc, f * 3 + u), d.tensors.at("fc1/weights")[u * 2 + f]);
  EXPECT_FLOAT_EQ(FloatAt(bundle->tensors.at("beta1_power"), 0),
                  static_cast<float>(std::pow(0.5, 42.0)));
  EXPECT_FLOAT_EQ(FloatAt(bundle->tensors.at("beta2_power"), 0),
                  static_cast<float>(std::pow(0.999, 42.0)));
  int64_t step = 0;
  std::memcpy(&step, bundle->tensors.at("global_step").data.data(), 8);
  EXPECT_EQ(step, 41);

  auto back = ReadTfCheckpoint(prefix);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->global_step, 41);
  EXPECT_TRUE(IsFromTfBundle(*back));
  ASSERT_EQ(back->tensors.size(), d.tensors.size());
  for (const auto& [name, t] : d.tensors) {
    ASSERT_TRUE(back->tensors.count(name)) << name;
    EXPECT_TRUE(BitwiseEqual(back->tensors.at(name), t)) << name;
  }
  EXPECT_EQ(TfShape(Shape{32, 1, 5, 5}), (Shape{5, 5, 1, 32}));
}

TEST_F(TfBundleTest, ATensorFlowTrainDirRestoresItsNewestWholeBundle) {
  // TF's Saver layout: model.ckpt-N.{index,data-*} and a `checkpoint` state naming them.
  ASSERT_TRUE(WriteTfCheckpoint(Path("model.ckpt-10"), Trained(10)).ok());
  ASSERT_TRUE(WriteTfCheckpoint(Path("model.ckpt-20"), Trained(20)).ok());
  CheckpointState state{"model.ckpt-20", {"model.ckpt-10", "model.ckpt-20"}};
  WriteBytes(Path("checkpoint"), FormatCheckpointState(state));
  CheckpointManager manager(dir_, 0);
  auto latest = manager.RestoreLatest();
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(latest->global_step, 20);
  std::string index = ReadBytes(Path("model.ckpt-20.index"));
  index[index.size() - 60] ^= 1;
  WriteBytes(Path("model.ckpt-20.index"), index);
  latest = manager.RestoreLatest();  // the damaged newest is skipped, as for pstrain's files
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(latest->global_step, 10);
  auto named = manager.Restore("model.ckpt-20");  // a named one is read strictly
  ASSERT_FALSE(named.ok());
  EXPECT_TRUE(Contains(named.status(), Path("model.ckpt-20.index"))) << named.status().ToString();
}

TEST_F(TfBundleTest, AClusterCheckpointIsJoinedAtItsCommittedStepSlotsOfPartsToo) {
  for (int64_t step : {100, 200}) {
    for (int task = 0; task < 2; ++task) {
      CheckpointData shard;
      shard.global_step = step;
      const std::string part = "fc1/weights/part_" + std::to_string(task);
      shard.tensors[part] = Pattern(Shape{2, 3}, static_cast<float>(step + task));
      shard.tensors[part + "/m"] = Pattern(Shape{2, 3}, static_cast<float>(step + task + 50));
      if (task == 1) shard.tensors["fc1/bias"] = Pattern(Shape{4}, 9);
      ASSERT_TRUE(CheckpointManager(ShardDirectory(dir_, task, 2), 5).Save(shard).ok());
    }
  }
  ASSERT_TRUE(CommitStep(dir_, 100, 5).ok());  // 200 was saved but never committed
  auto joined = ReadJoinedCheckpoint(dir_);
  ASSERT_TRUE(joined.ok()) << joined.status().ToString();
  EXPECT_EQ(joined->data.global_step, 100);
  std::vector<std::string> names;
  for (const auto& [name, t] : joined->data.tensors) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"fc1/bias", "fc1/weights", "fc1/weights/m"}));
  const Tensor& w = joined->data.tensors.at("fc1/weights");
  ASSERT_EQ(w.shape(), (Shape{4, 3}));
  const Tensor p0 = Pattern(Shape{2, 3}, 100), p1 = Pattern(Shape{2, 3}, 101);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(w[i], p0[i]);
    EXPECT_EQ(w[6 + i], p1[i]);
  }
  EXPECT_EQ(joined->data.tensors.at("fc1/weights/m")[6], Pattern(Shape{2, 3}, 151)[0]);
  EXPECT_EQ(joined->files.at("fc1/weights").size(), 2u);
}

TEST_F(TfBundleTest, AClusterTrainDirWithoutOneServersShardIsNotFoundNamingTheMissingOne) {
  // ps 0's shard is here, ps 1 keeps its own on another host's disk.
  ASSERT_TRUE(
      CheckpointManager(ShardDirectory(dir_, 0, 2), 5).Save(testing_util::SmallModel(100)).ok());
  ASSERT_TRUE(CommitStep(dir_, 100, 5).ok());
  auto joined = ReadJoinedCheckpoint(dir_);
  ASSERT_FALSE(joined.ok());
  EXPECT_EQ(joined.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(joined.status(), "holds ps-0-of-2 but not ps-1-of-2"))
      << joined.status().ToString();
}

}  // namespace
}  // namespace pstrain
