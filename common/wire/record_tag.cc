#include "common/wire/record_tag.h"

#include <optional>

#include "common/wire/chain_link.h"

namespace pstrain {
namespace wire {
namespace {

constexpr char kContext[] = "pstrain replication record v1";
constexpr size_t kDigestBytes = 32;

std::string KeyName(int ps_task) { return "ps-" + std::to_string(ps_task); }

}  // namespace

std::string RecordDigest(const Message& record) {
  KeyedHash h("", kDigestBytes);
  HashRecordPlace(record, &h);
  h.Number(record.made_epoch);
  h.String(record.link);
  h.String(record.state_digest);
  for (const NamedTensor& t : record.tensors) {
    h.Number(t.tensor.shape().rank());
    for (int64_t d : t.tensor.shape().dims()) h.Number(d);
    if (t.tensor.bytes() > 0) h.Bytes(t.tensor.data(), t.tensor.bytes());
  }
  for (const PushEntry& e : record.pushes) {
    h.Number(e.reply_step);
    h.Number(e.reply_value);
    h.String(e.reply_text);
  }
  h.Number(record.uses.size());
  for (const ChunkUse& u : record.uses) {
    h.Number(u.epoch);
    h.Number(u.chunk);
    h.Number(u.count);
  }
  return h.Final();
}

Result<std::vector<MapProof>> TagRecord(const Message& record, const ClusterKeys& head,
                                        PairKeys* pairs) {
  std::vector<MapProof> tags;
  if (!head.curve()) return tags;
  std::optional<PairKeys> once;
  if (!pairs) pairs = &once.emplace(head.own.secret_key);
  const std::string digest = RecordDigest(record);
  for (size_t t = 0; t < head.ps_keys.size(); ++t) {
    const std::string name = KeyName(static_cast<int>(t));
    if (name == head.own_name) continue;
    ASSIGN_OR_RETURN(std::string tag, pairs->Tag(head.ps_keys[t], kContext, digest));
    tags.push_back({name, std::move(tag)});
  }
  return tags;
}

Status CheckRecordTag(const Message& record, int head_task, const ClusterKeys& own,
                      PairKeys* pairs) {
  if (!own.curve()) return Status::OK();
  const std::string what = "record " + std::to_string(record.sequence) + " of shard " +
                           std::to_string(record.shard) + " (head: task " +
                           std::to_string(head_task) + ")";
  if (head_task < 0 || static_cast<size_t>(head_task) >= own.ps_keys.size()) {
    return PermissionDenied(what + ": no public key of that task in " + own.dir +
                            " to check its tag with (" + std::to_string(own.ps_keys.size()) +
                            " server keys)");
  }
  for (const MapProof& t : record.record_tags) {
    if (t.name != own.own_name) continue;
    std::optional<PairKeys> once;
    if (!pairs) pairs = &once.emplace(own.own.secret_key);
    ASSIGN_OR_RETURN(std::string expected,
                     pairs->Tag(own.ps_keys[head_task], kContext, RecordDigest(record)));
    if (SameTag(expected, t.tag)) return Status::OK();
    return PermissionDenied(what + " carries a tag for " + own.own_name +
                            " that the head's key did not make over its content: refused, "
                            "nothing applied");
  }
  return PermissionDenied(what + " carries no tag for " + own.own_name + " from the head (" +
                          std::to_string(record.record_tags.size()) +
                          " tags): refused, nothing applied");
}

}  // namespace wire
}  // namespace pstrain
