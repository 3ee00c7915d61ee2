// Writes the seed corpora in fuzz/corpus/<target>/: real encoded messages, request sequences for
// the server, TFRecord and IDX files, configs (a model per case of the layer test table). Each seed
// follows the input layout its target's header comment describes. Also rewrites the wire-decode
// regressions that are headers in this build's schema, so that after a protocol change they still
// reach the checks they were kept for instead of the version check. Run after changing a layout
// or the protocol, then commit the seeds:
//   build/fuzz/pstrain-fuzz-corpus <source dir>
#include <capnp/any.h>
#include <capnp/message.h>
#include <capnp/schema.h>
#include <capnp/serialize.h>
#include <glog/logging.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/data/example.pb.h"
#include "common/data/image_codec.h"
#include "common/data/image_example.h"
#include "common/record_io.h"
#include "common/wire/codec.h"
#include "common/wire/pstrain.capnp.h"
#include "common/wire/request.h"
#include "tests/worker/layer_cases.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;
using wire::Message;
using wire::MessageType;

// Bytes in the order a target reads them (fuzz/fuzz_input.h).
class Seed {
 public:
  Seed& Byte(uint8_t b) {
    bytes_.push_back(static_cast<char>(b));
    return *this;
  }
  Seed& Bytes(std::initializer_list<uint8_t> bs) {
    for (uint8_t b : bs) Byte(b);
    return *this;
  }
  template <typename T>
  Seed& Raw(T v) {
    bytes_.append(reinterpret_cast<const char*>(&v), sizeof(v));
    return *this;
  }
  Seed& LengthPrefixed(const std::string& s) {
    CHECK_LE(s.size(), 65535u);
    Raw<uint16_t>(static_cast<uint16_t>(s.size()));
    bytes_ += s;
    return *this;
  }
  Seed& Append(const std::string& s) {
    bytes_ += s;
    return *this;
  }
  const std::string& str() const { return bytes_; }

 private:
  std::string bytes_;
};

void Write(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out << bytes;
  CHECK(out.good()) << (dir / name);
}

Tensor Iota(Shape shape) {
  Tensor t(std::move(shape));
  for (int64_t i = 0; i < t.size(); ++i) t[i] = 0.5f * static_cast<float>(i);
  return t;
}

// fuzz_wire_decode: a flags byte, then each frame as a 16-bit length and its bytes.
std::string WireSeed(const Message& m, uint8_t flags) {
  auto encoded = wire::Encode(m);
  CHECK(encoded.ok()) << encoded.status().ToString();
  Seed seed;
  seed.Byte(flags).LengthPrefixed(encoded->header);
  for (const wire::Frame& f : encoded->tensor_frames) {
    seed.LengthPrefixed(std::string(static_cast<const char*>(f.data), f.size));
  }
  return seed.str();
}

void WireSeeds(const fs::path& dir) {
  Message reg = wire::Request(MessageType::kRegister, "chief", 0);
  reg.tensors = {{"w", Iota(Shape{2, 3})}, {"b", Iota(Shape{3})}};
  Write(dir, "register", WireSeed(reg, 0));

  Message pull = wire::Request(MessageType::kPull, "worker", 1);
  pull.request_id = 7;
  pull.names = {"w", "b"};
  Write(dir, "pull", WireSeed(pull, 0));

  Message push = wire::Request(MessageType::kPush, "worker", 1);
  push.request_id = 8;
  push.step = 12;
  push.sequence = 1;
  push.incarnation = 5;
  push.assigns = {"bn/moving_mean"};
  // 2048 floats = 8 KiB: at wire::kWrapMinBytes, so the frame is wrapped, not copied.
  push.tensors = {{"w", Iota(Shape{2, 3})}, {"bn/moving_mean", Iota(Shape{2048})}};
  Write(dir, "push", WireSeed(push, 0));
  Write(dir, "push-small-limits", WireSeed(push, 0x0f));
  Write(dir, "push-misaligned", WireSeed(push, 0x10));
  // --push_dtype=bf16: a gradient frame of 2 bytes an element, at an odd address too.
  push.assigns.clear();
  push.tensors = {{"w", Iota(Shape{2, 3}), wire::TensorDType::kBfloat16}};
  Write(dir, "push-bfloat16", WireSeed(push, 0));
  Write(dir, "push-bfloat16-misaligned", WireSeed(push, 0x10));
  Message bf16_pull = pull;
  bf16_pull.pull_dtype = wire::TensorDType::kBfloat16;
  Write(dir, "pull-bfloat16", WireSeed(bf16_pull, 0));

  Message barrier;
  barrier.type = MessageType::kBarrier;
  barrier.role = "worker";
  barrier.text = "start";
  barrier.value = 3;
  Write(dir, "barrier", WireSeed(barrier, 0));

  Message error = wire::ErrorReply(pull, NotFound("no variable named 'x'"));
  Write(dir, "error-reply", WireSeed(error, 0));

  // Replication (docs/replication.md, section 3).
  Message record = wire::Request(MessageType::kReplicate, "ps", 0);
  record.request_id = 9;
  record.shard = 1;
  record.map_epoch = 2;
  record.sequence = 13;
  record.step = 12;
  record.assigns = {"bn/moving_mean"};
  record.tensors = {{"w", Iota(Shape{2, 3})}, {"bn/moving_mean", Iota(Shape{4})}};
  record.pushes = {{"worker", 1, 5, 1, 13, 0, ""}, {"chief", 0, 6, 4, 13, -1, "stale"}};
  record.uses = {{0, 3, 100}, {0, 4, 28}};
  record.link = std::string(32, 'l');
  record.made_epoch = 2;
  record.record_tags = {{"ps-1", std::string(32, 't')}, {"ps-2", std::string(32, 'u')}};
  record.state_digest = std::string(wire::kStateDigestBytes, 's');
  Write(dir, "replicate", WireSeed(record, 0));
  Message copy = record;
  copy.type = MessageType::kReplicaCopy;
  copy.step = 0;
  copy.made_epoch = 0;
  copy.record_tags.clear();
  copy.state_digest.clear();
  copy.assigns.clear();
  copy.tensors = {{"w", Iota(Shape{2, 3})}, {"w/Momentum", Iota(Shape{2, 3})}};
  copy.text = "fingerprint";
  Write(dir, "replica-copy", WireSeed(copy, 0));
  Message map = wire::Request(MessageType::kShardMap, "chief", 0);
  map.map_epoch = 3;
  map.chains = {{0, {0, 1}, {}}, {1, {1}, {0}}};
  map.map_proofs = {{"worker-0", std::string(32, 'a')}, {"worker-1", std::string(32, 'b')}};
  Write(dir, "shard-map-set", WireSeed(map, 0));
  Message map_reply = map;
  map_reply.type = MessageType::kOk;
  map_reply.caught_up = {{1, {0}, {}}};
  Write(dir, "shard-map-reply", WireSeed(map_reply, 0));
  Message lease = wire::Request(MessageType::kDataLease, "worker", 1);
  lease.value = 2;
  Write(dir, "data-lease", WireSeed(lease, 0));
  // Embedding-table rows: the ids in their own int64 frame, before the gradient rows.
  Message row_pull;
  row_pull.type = MessageType::kRowPull;
  row_pull.role = "worker";
  row_pull.task_index = 1;
  row_pull.text = "C1";
  row_pull.ids = {3, 0, 17, 3};
  Write(dir, "row-pull", WireSeed(row_pull, 0));
  Message row_push = row_pull;
  row_push.type = MessageType::kRowPush;
  row_push.step = 4;
  row_push.sequence = 2;
  row_push.tensors = {{"C1", Iota(Shape{4, 2})}};
  Write(dir, "row-push", WireSeed(row_push, 0));
  Write(dir, "aborted-reply",
        WireSeed(wire::ErrorReply(push, Aborted("not the head of shard 1 at epoch 2")), 0));

  // The host protocol: a rendezvous and a rank's part of a broadcast, from rank 1.
  Message set = wire::Request(MessageType::kStoreSet, "rank", 1);
  set.names = {"nccl-id"};
  set.text = "00ff";
  Write(dir, "store-set", WireSeed(set, 0));
  Message collective = wire::Request(MessageType::kCollective, "rank", 1);
  collective.text = "broadcast";
  collective.value = 6;
  collective.step = 3;
  collective.root = 1;
  collective.tensors = {{"in", Iota(Shape{6})}};
  Write(dir, "collective", WireSeed(collective, 0));
}

// A header built straight from the schema, with what Encode would never write.
std::string RawHeader(const std::function<void(wire::schema::Header::Builder)>& fill) {
  capnp::MallocMessageBuilder builder;
  auto header = builder.initRoot<wire::schema::Header>();
  header.setVersion(wire::kProtocolVersion);
  fill(header);
  kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
  return std::string(reinterpret_cast<const char*>(words.begin()), words.size() * 8);
}

// fuzz_wire_decode's regressions that are one header each, in this build's schema.
void WireRegressions(const fs::path& dir) {
  const auto one_header = [](const std::string& header) {
    return Seed().Byte(0).LengthPrefixed(header).str();
  };
  Write(dir, "pull-name-holding-nul", one_header(RawHeader([](wire::schema::Header::Builder h) {
          h.setRole("worker");
          auto names = h.getBody().initWorker().initPull().initNames(2);
          names.set(0, "w");
          names.set(1, capnp::Text::Reader("b\0x", 3));
        })));
  Write(dir, "role-holding-nul", one_header(RawHeader([](wire::schema::Header::Builder h) {
          h.setRole(capnp::Text::Reader("work\0er", 7));
          h.setTaskIndex(1);
          h.getBody().initWorker().initHeartbeat();
        })));
  // A replica copy whose retry-cache list claims 2^17 entries of no bytes each: few enough for
  // Cap'n Proto's traversal limit, so that the decoder's own entry count check must refuse it.
  Write(dir, "shrunken-struct-list-amplifies",
        one_header(RawHeader([](wire::schema::Header::Builder h) {
          h.setRole("ps");
          h.setTaskIndex(0);
          auto copy = h.getBody().initReplication().initReplicaCopy();
          copy.setFingerprint("fingerprint");
          const uint32_t slot = capnp::Schema::from<wire::schema::ReplicaCopy>()
                                    .getFieldByName("pushes")
                                    .getProto()
                                    .getSlot()
                                    .getOffset();
          capnp::AnyStruct::Builder(kj::mv(copy))
              .getPointerSection()[slot]
              .initAs<capnp::List<capnp::Void>>(1 << 17);
        })));
}

// fuzz_ps_handle: see the harness for the order of the reads.
Seed ServerSetup(uint8_t mode, uint8_t workers, uint8_t optimizer, uint8_t schedule,
                 uint8_t clipping) {
  Seed s;
  // mode, workers - 1, accumulate_n, max_staleness, backup_workers, max_to_keep - 1
  s.Bytes({mode, workers, 0, 1, 0, 0, optimizer, schedule, clipping});
  s.Byte(1);                                // the chief initialises
  s.Bytes({1, 2, 3, 1, 2, 3, 1, 1, 1, 3});  // w (6 values), b (3), s (1): 1, -1, 0.25
  return s;
}
// A request: role, task index, step (the current global step), value 0 or `value`, text.
void Header(Seed* s, uint8_t op, uint8_t value = 0, uint8_t text = 0) {
  s->Bytes({op, 1, 1, 0, 1, value, text});
}
void Push(Seed* s, uint8_t value_byte, uint8_t peer) {
  Header(s, 2);
  s->Bytes({0, 1, 0, 0});  // no names; one tensor "w" of its own shape
  for (int i = 0; i < 6; ++i) s->Byte(value_byte);
  s->Byte(peer);
}
void Pull(Seed* s, uint8_t peer) {
  Header(s, 1);
  s->Bytes({1, 1, 0, peer});  // names: "b"; no tensors
}
void Checkpoint(Seed* s) {
  Header(s, 5);
  s->Bytes({0, 0, 0});
}

void ServerSeeds(const fs::path& dir) {
  // value bytes: 3 = 0.25, 6 = NaN, 7 = Inf
  for (uint8_t mode : {0, 1, 2}) {
    Seed s = ServerSetup(mode, 1, mode, mode, 0);
    Push(&s, 3, 1);
    Pull(&s, 1);
    Push(&s, 3, 2);
    Push(&s, 6, 1);
    Pull(&s, 2);
    Checkpoint(&s);
    s.Byte(8);  // restart
    Pull(&s, 1);
    Write(dir, "mode" + std::to_string(mode) + "-push-pull-checkpoint-restart", s.str());
  }
  Seed b = ServerSetup(0, 0, 2, 1, 1);
  Header(&b, 3, 2, 1);  // barrier "start" of 2
  b.Bytes({0, 0, 1});
  Header(&b, 3, 2, 1);
  b.Bytes({0, 0, 2});
  Header(&b, 4);  // heartbeat
  b.Bytes({0, 0, 1});
  Push(&b, 7, 1);
  Header(&b, 6);  // shutdown
  b.Bytes({0, 0, 0});
  Write(dir, "barrier-heartbeat-inf-shutdown", b.str());

  // The replication requests (op bytes 252..255), each authorised and well formed, then one
  // from a key that is not the server's it claims (all refused), then a push and a pull.
  Seed r = ServerSetup(0, 1, 2, 0, 0);
  // Request's reads: op, role, task, step, incarnation, sequence, value, text, names, assigns,
  // root, tensors; then ReplicationFields': ps?, shard, map epoch, pushes, chains, uses; then
  // the peer and the key.
  const auto replicate = [&r](uint8_t op, uint8_t identity) {
    r.Bytes({op, 1, 1, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0});  // task 0, sequence 1, value 0
    r.Bytes({1, 0, 3, 3, 3, 3, 3, 3, 3});               // tensor "w" of its shape, 0.25s
    r.Bytes({1, 1, 1});                                 // as ps, shard 0, epoch 1
    r.Bytes({1, 0, 2, 1, 1, 1, 1, 0});                  // one push entry: worker 1's
    r.Bytes({0, 1, 1, 3, 128});                         // no chains, one use
    r.Bytes({1, identity});
  };
  replicate(252, 4);                                      // replicate from ps-0
  replicate(253, 4);                                      // replica copy from ps-0
  r.Bytes({254, 0, 1, 0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0});  // the chief sets the shard map
  r.Bytes({0, 1, 2, 0, 1, 1, 2, 1, 2, 0, 0, 0, 1});       // epoch 2, chain 0 = [0, 1]
  r.Bytes({254, 2, 1, 0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0});  // an evaluator gets it
  r.Bytes({0, 0, 0, 0, 0, 0, 0, 3});
  r.Bytes({255, 1, 2, 0, 1, 1, 0, 1, 1, 0, 0, 0, 0, 0});  // worker 1 leases epoch 1
  r.Bytes({0, 0, 0, 0, 0, 0, 2, 2});
  replicate(252, 2);  // worker-1's key claiming ps 0
  Push(&r, 3, 1);
  Pull(&r, 1);
  Write(dir, "replication-requests-refused", r.str());

  // Embedding-table rows (op bytes 250, 251) on an Adagrad server: a pull creating rows 2 and 5,
  // a push of 0.25s, a NaN push (refused), a save, a restart that restores them, a pull.
  // Request's reads: op, role, task, step, incarnation, sequence (Bool, Range), value (Bool,
  // Range), text, names, assigns, root, tensors; RowFields': table, count, each id (Bool, Range),
  // and for a push rows, dimension, the values and the name; then the peer and the key.
  Seed t = ServerSetup(0, 1, 3, 0, 0);
  const auto rows = [&t](uint8_t op, uint8_t sequence, int value_byte) {
    t.Bytes({op, 1, 1, 0, 1, 1, sequence, 1, 0, 0, 0, 0, 0, 0});  // worker 0
    t.Bytes({0, 3, 1, 2, 1, 5, 1, 2});                            // C1: ids 2, 5, 2
    if (value_byte >= 0) {
      t.Bytes({0, 0});  // a row per id, dimension 2
      for (int i = 0; i < 6; ++i) t.Byte(static_cast<uint8_t>(value_byte));
      t.Byte(0);  // named after the table
    }
    t.Bytes({1, 0});  // peer w0, plaintext
  };
  rows(250, 1, -1);
  rows(251, 1, 3);
  rows(251, 2, 6);
  t.Bytes({5, 0, 1, 2, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0});  // the chief saves step 1
  t.Byte(8);                                                     // restart
  rows(250, 1, -1);
  Write(dir, "rows-pull-push-checkpoint-restart", t.str());
}

// Serialized again with the features map in key order: protobuf writes maps in no fixed order,
// and the seeds in git should not change each time they are written.
std::string Deterministic(const std::string& serialized) {
  tensorflow::Example example;
  CHECK(example.ParseFromString(serialized));
  std::string record;
  {
    google::protobuf::io::StringOutputStream out(&record);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    CHECK(example.SerializeToCodedStream(&coded));
  }
  return record;
}

std::string RawImageRecord(const ImageShape& shape, int64_t label) {
  std::vector<uint8_t> pixels(shape.bytes());
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 7);
  return Deterministic(EncodeImageExample(pixels.data(), shape, label));
}

// An 8x8 gradient, `channels` deep, as JPEG (quality 95) or PNG bytes.
std::string EncodedImage(bool jpeg, int64_t channels) {
  const ImageShape shape{8, 8, channels};
  std::vector<uint8_t> pixels(shape.bytes());
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(16 + i * 3);
  auto bytes =
      jpeg ? EncodeJpegPixels(pixels.data(), shape, 95) : EncodePngPixels(pixels.data(), shape);
  CHECK(bytes.ok()) << bytes.status().ToString();
  return *bytes;
}

// fuzz_tfrecord: a mode byte, a shape byte (0: 28x28x1, 1: 2x2x1, 3: 8x8x3), then the file,
// the records, or (mode 5) the JPEG/PNG bytes of one image/encoded record.
void TfRecordSeeds(const fs::path& dir) {
  const ImageShape small{2, 2, 1};
  const std::string a = RawImageRecord(small, 3), b = RawImageRecord(small, 9);
  Write(dir, "raw-2-records", Seed().Bytes({0, 1}).Append(FramedRecord(a) + FramedRecord(b)).str());
  Write(dir, "raw-fashion-mnist-shape",
        Seed().Bytes({0, 0}).Append(FramedRecord(RawImageRecord({28, 28, 1}, 5))).str());
  Write(dir, "framed-2-records", Seed().Bytes({1, 1, 2}).LengthPrefixed(a).LengthPrefixed(b).str());
  Write(dir, "framed-then-bad-length",
        Seed().Bytes({3, 1, 1}).LengthPrefixed(a).Raw<uint64_t>(100).Append("0123456789").str());
  const std::string jpeg = EncodedImage(true, 3), png = EncodedImage(false, 3);
  Write(dir, "image-jpeg-rgb", Seed().Bytes({5, 3}).Append(jpeg).str());
  Write(dir, "image-png-rgb", Seed().Bytes({5, 3}).Append(png).str());
  Write(dir, "image-jpeg-gray-to-rgb", Seed().Bytes({5, 3}).Append(EncodedImage(true, 1)).str());
  Write(dir, "image-png-rgb-to-gray", Seed().Bytes({5, 1}).Append(png).str());
  Write(dir, "image-jpeg-truncated",
        Seed().Bytes({5, 3}).Append(jpeg.substr(0, jpeg.size() / 2)).str());
  const std::string example =
      Deterministic(EncodeImageFileExample(jpeg, "jpeg", ImageShape{8, 8, 3}, 7));
  Write(dir, "framed-jpeg-example", Seed().Bytes({1, 3, 1}).LengthPrefixed(example).str());
}

std::string Idx(std::vector<uint32_t> dims, uint8_t fill) {
  std::string s{0, 0, 8, static_cast<char>(dims.size())};
  size_t n = 1;
  for (uint32_t d : dims) {
    for (int shift : {24, 16, 8, 0}) s.push_back(static_cast<char>(d >> shift));
    n *= d;
  }
  for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>((i + fill) % 10));
  return s;
}

std::string Gzip(const std::string& bytes) {
  std::string out(compressBound(bytes.size()) + 64, '\0');
  z_stream z{};
  CHECK_EQ(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);  // gzip
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  CHECK_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// fuzz_idx: a flags byte (1: gzip the images, 2: gzip the labels), the images file as a
// 16-bit length and its bytes, the labels file as the rest.
void IdxSeeds(const fs::path& dir) {
  const std::string images = Idx({2, 28, 28}, 0), labels = Idx({2}, 4);
  Write(dir, "fashion-mnist-2", Seed().Byte(0).LengthPrefixed(images).Append(labels).str());
  Write(dir, "fashion-mnist-2-gzipped", Seed().Byte(3).LengthPrefixed(images).Append(labels).str());
  // Written as they are: zlib reads the gzip stream the fuzzer mutates.
  Write(dir, "gzip-stream", Seed().Byte(0).LengthPrefixed(Gzip(images)).Append(Gzip(labels)).str());
  Write(dir, "rank4-rgb", Seed().Byte(0).LengthPrefixed(Idx({2, 2, 2, 3}, 1)).Append(labels).str());
}

void CopyFile(const fs::path& from, const fs::path& dir) {
  fs::create_directories(dir);
  fs::copy_file(from, dir / from.filename(), fs::copy_options::overwrite_existing);
}

// One model per case of the layer test table (tests/worker/layer_cases.h), so that every layer
// type the tests know, with every field they use, is a seed: the case's layer on the model input
// (a rank-1 input through a flatten first), then flatten and the loss unless it is the loss.
std::string LayerCaseModel(const worker::testing::LayerCase& c) {
  const Shape& in = c.inputs[0];
  for (const Shape& s : c.inputs) CHECK(s == in) << c.name << ": inputs of different shapes";
  CHECK(in.rank() >= 1 && in.rank() <= 3) << c.name << ": input " << in.ToString();
  std::vector<int64_t> dims = in.dims();
  while (dims.size() < 3) dims.insert(in.rank() == 1 ? dims.end() : dims.begin(), 1);
  std::string yaml =
      "model:\n  name: " + c.name + "\n  input: " + Shape(dims).ToString() + "\n  layers:\n";
  std::string source = "input";
  if (in.rank() == 1) {
    yaml += "    - {name: features, type: flatten}\n";
    source = "features";
  }
  const size_t open = c.yaml.find('{'), close = c.yaml.rfind('}');
  CHECK(open != std::string::npos && close != std::string::npos) << c.name << ": " << c.yaml;
  std::string inputs = "[";
  for (size_t i = 0; i < c.inputs.size(); ++i) inputs += (i ? ", " : "") + source;
  yaml += "    - {name: " + c.name + ", " + c.yaml.substr(open + 1, close - open - 1) +
          ", inputs: " + inputs + "]}\n";
  if (c.labels.empty()) {  // not the loss
    yaml += "    - {name: flat, type: flatten}\n";
    yaml += "    - {name: loss, type: softmax_cross_entropy}\n";
  }
  return yaml;
}

// fuzz_config: YAML text.
void ConfigSeeds(const fs::path& source, const fs::path& dir) {
  CopyFile(source / "configs/refnet.yaml", dir);
  CopyFile(source / "configs/resnet20.yaml", dir);
  CopyFile(source / "tests/distributed/testdata/sgd.yaml", dir);
  Write(dir, "every-train-field.yaml", R"(train:
  seed: 3
  batch_size: 32
  epochs: 2
  max_steps: 100
  weight_decay: 0.0001
  optimizer: {type: rmsprop, decay: 0.9, momentum: 0.5, epsilon: 1.0e-10, centered: true}
  learning_rate: {schedule: piecewise_constant, boundaries: [10, 20], values: [0.1, 0.01, 0.001]}
  clipping: {by_value: [-1.0, 1.0], by_norm: 5.0, by_global_norm: 5.0}
input:
  source: tfrecord
  tfrecord_pattern: /tmp/train-*.tfrecord
  test_tfrecord_pattern: /tmp/test-*.tfrecord
  shuffle_capacity: 100
  min_after_dequeue: 10
  prefetch_batches: 2
  threads: 2
  random_flip: true
  random_crop_padding: 4
  mean: [0.5]
  std: [0.25]
)");
  for (const worker::testing::LayerCase& c : worker::testing::LayerCases()) {
    Write(dir, "layer-" + c.name + ".yaml", LayerCaseModel(c));
  }
  Write(dir, "momentum-exponential-decay.yaml", R"(train:
  optimizer: {type: momentum, momentum: 0.9, nesterov: true}
  learning_rate: {schedule: exponential_decay, initial: 0.1, decay_steps: 100, decay_rate: 0.96, staircase: true}
)");
  Write(dir, "adagrad-adam.yaml",
        "train: {optimizer: {type: adagrad, initial_accumulator_value: 0.1}, learning_rate: "
        "{initial: 0.01}}\nother: {optimizer: {type: adam, beta1: 0.9, beta2: 0.999, epsilon: "
        "1.0e-8}}\n");
}

// fuzz_host_hub: a group-size byte, then events (see the harness for the order of the reads).
// A collective call of rank `rank` with `elements` values 0..7 (as bytes) in one tensor.
void HubCall(Seed* s, uint8_t rank, uint8_t op, uint8_t n, uint8_t number, uint8_t root,
             const std::vector<uint8_t>& values) {
  s->Bytes({0, static_cast<uint8_t>(rank + 1), op, 1, n, number, 1, root, 0, 1,
            static_cast<uint8_t>(values.size())});
  for (uint8_t v : values) s->Byte(v);
}

void HubSeeds(const fs::path& dir) {
  for (uint8_t op : {0, 1, 2, 3}) {  // AllReduce, Broadcast (root 1), ReduceScatter, AllGather
    Seed s;
    s.Byte(1);  // 2 ranks
    const uint8_t n = 4;
    const std::vector<uint8_t> full{1, 2, 3, 4}, half{5, 6}, none{};
    for (uint8_t rank : {0, 1}) {
      const std::vector<uint8_t>& in = op == 3 ? half : op == 1 && rank == 0 ? none : full;
      HubCall(&s, rank, op, n, 0, 1, in);
    }
    HubCall(&s, 0, op, n, 1, 1, op == 3 ? half : full);  // rank 1 never comes: expires
    s.Bytes({2, 11});                                    // 11 s pass
    Write(dir, "op" + std::to_string(op) + "-two-ranks-then-a-straggler", s.str());
  }
  Seed store;
  store.Byte(2);                 // 3 ranks
  store.Bytes({3, 0, 1, 0, 1});  // store set "a" = "00"
  store.Bytes({3, 1, 1, 0, 0});  // store get "a"
  HubCall(&store, 2, 0, 2, 0, 0, {1, 1});
  HubCall(&store, 2, 0, 2, 0, 0, {1, 1});  // the same rank twice
  Write(dir, "store-then-a-rank-twice", store.str());
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s SOURCE_DIR (writes SOURCE_DIR/fuzz/corpus/<target>/)\n",
                 argv[0]);
    return 2;
  }
  const std::filesystem::path source = argv[1];
  const std::filesystem::path corpus = source / "fuzz" / "corpus";
  pstrain::WireSeeds(corpus / "fuzz_wire_decode");
  pstrain::WireRegressions(source / "fuzz" / "regressions" / "fuzz_wire_decode");
  pstrain::ServerSeeds(corpus / "fuzz_ps_handle");
  pstrain::TfRecordSeeds(corpus / "fuzz_tfrecord");
  pstrain::IdxSeeds(corpus / "fuzz_idx");
  pstrain::ConfigSeeds(source, corpus / "fuzz_config");
  pstrain::HubSeeds(corpus / "fuzz_host_hub");
  std::printf("seeds written to %s\n", corpus.c_str());
  return 0;
}
