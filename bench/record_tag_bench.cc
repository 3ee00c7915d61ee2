// What the head's tags of replication records cost (common/wire/record_tag.h): the head hashes
// each record's tensor bytes once (BLAKE2b) and makes one tag per other server key, and each
// replica hashes them once more and checks its own tag. Printed: the digest's ns per MiB of
// tensor bytes, and per record of --mib MiB the head's and a replica's time, next to the time a
// record of that size spends on a 1 Gbit/s link.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "bench/timing.h"
#include "common/wire/record_tag.h"
#include "tools/tool_main.h"

DEFINE_double(mib, 1.0, "tensor MiB per record (with --replicas a push part is 1 MiB)");
DEFINE_int32(servers, 3, "ps tasks of the cluster: the head tags for each other one");
DEFINE_int32(records, 200, "records timed");

namespace pstrain {
namespace {

using bench::NanosPerCall;

Status Main() {
  if (FLAGS_mib <= 0 || FLAGS_servers < 2 || FLAGS_records < 1) {
    return InvalidArgument("--mib must be > 0, --servers >= 2 and --records >= 1");
  }
  const std::string dir = std::filesystem::temp_directory_path() / "pstrain-record-tag-bench";
  std::filesystem::remove_all(dir);
  RETURN_IF_ERROR(wire::WriteClusterKeys(dir, FLAGS_servers, 1, 0));
  ASSIGN_OR_RETURN(wire::ClusterKeys head, wire::LoadClusterKeys(dir + "/ps-0", "ps", 0));
  ASSIGN_OR_RETURN(wire::ClusterKeys tail, wire::LoadClusterKeys(dir + "/ps-1", "ps", 1));
  std::filesystem::remove_all(dir);

  wire::Message record;
  record.type = wire::MessageType::kReplicate;
  record.sequence = 1;
  const int64_t floats = static_cast<int64_t>(FLAGS_mib * (1 << 20) / sizeof(float));
  record.tensors = {{"w", Tensor::Filled(Shape{floats}, 0.5f)}};
  const double mib = static_cast<double>(record.tensors[0].tensor.bytes()) / (1 << 20);

  std::string digest;  // kept, so that the digest is made
  ASSIGN_OR_RETURN(const double digest_ns, NanosPerCall(FLAGS_records, [&] {
                     digest = wire::RecordDigest(record);
                     return Status::OK();
                   }));

  // As servers tag and check: each pair's key made once (wire::PairKeys).
  wire::PairKeys head_pairs(head.own.secret_key), tail_pairs(tail.own.secret_key);
  ASSIGN_OR_RETURN(record.record_tags, wire::TagRecord(record, head, &head_pairs));
  ASSIGN_OR_RETURN(const double head_ns, NanosPerCall(FLAGS_records, [&] {
                     return wire::TagRecord(record, head, &head_pairs).status();
                   }));
  ASSIGN_OR_RETURN(const double replica_ns, NanosPerCall(FLAGS_records, [&] {
                     return wire::CheckRecordTag(record, 0, tail, &tail_pairs);
                   }));

  wire::Message empty = record;  // the tags alone: a record without tensor bytes
  empty.tensors.clear();
  ASSIGN_OR_RETURN(const double kept_ns, NanosPerCall(FLAGS_records, [&] {
                     return wire::TagRecord(empty, head, &head_pairs).status();
                   }));
  ASSIGN_OR_RETURN(const double anew_ns, NanosPerCall(FLAGS_records, [&] {
                     return wire::TagRecord(empty, head).status();
                   }));

  const double wire_ns = mib * (1 << 20) * 8.0;  // 1 Gbit/s: 8 ns a byte
  std::printf("digest: %.0f ns per MiB (BLAKE2b over the tensor bytes)\n", digest_ns / mib);
  std::printf(
      "record of %.2f MiB, %d servers: head %.0f us (digest and %d tags), replica %.0f us "
      "(digest and its tag); the record on a 1 Gbit/s link: %.0f us\n",
      mib, FLAGS_servers, head_ns / 1e3, FLAGS_servers - 1, replica_ns / 1e3, wire_ns / 1e3);
  std::printf(
      "a tag alone (a record without tensors): %.2f us with its pair's key kept, %.1f us "
      "with the key made anew (one X25519 product)\n",
      kept_ns / 1e3 / (FLAGS_servers - 1), anew_ns / 1e3 / (FLAGS_servers - 1));
  return Status::OK();
}

}  // namespace
}  // namespace pstrain

PSTRAIN_TOOL_MAIN(
    "The cost of the head's tags of replication records.\n"
    "Usage: pstrain-bench-record-tag --mib=1 --servers=3",
    pstrain::Main);
