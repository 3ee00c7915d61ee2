#include "ps/record_signature.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "common/wire/record_tag.h"

namespace pstrain {
namespace ps {
namespace {

// Maps remembered: a record in flight is at most a few maps old (the chief issues one per
// failure or rejoin, seconds apart).
constexpr size_t kMapsKept = 64;

}  // namespace

void RecordSignature::SawMap(uint64_t epoch, int head) {
  heads_[epoch] = head;
  while (heads_.size() > kMapsKept) heads_.erase(heads_.begin());
}

Status RecordSignature::Sign(uint64_t epoch, wire::Message* record) const {
  record->made_epoch = epoch;
  ASSIGN_OR_RETURN(record->record_tags, wire::TagRecord(*record, keys_, &pairs_));
  return Status::OK();
}

int RecordSignature::HeadAt(uint64_t epoch) const {
  if (heads_.empty()) return -1;
  auto after = heads_.upper_bound(epoch);
  return after == heads_.begin() ? after->second : std::prev(after)->second;
}

Status RecordSignature::Check(const wire::Message& record) const {
  if (!keys_.curve()) return Status::OK();
  const std::string what =
      "record " + std::to_string(record.sequence) + " of shard " + std::to_string(record.shard);
  if (heads_.empty() || record.made_epoch > heads_.rbegin()->first) {
    return PermissionDenied(
        what + " says it was made under map epoch " + std::to_string(record.made_epoch) +
        ", which this replica has not " +
        "seen (its newest: " + (heads_.empty() ? "none" : std::to_string(heads_.rbegin()->first)) +
        "): refused, nothing applied");
  }
  if (record.made_epoch < last_made_) {
    return PermissionDenied(what + " says it was made under map epoch " +
                            std::to_string(record.made_epoch) + ", older than the record before " +
                            "it (" + std::to_string(last_made_) + "): refused, nothing applied");
  }
  return wire::CheckRecordTag(record, HeadAt(record.made_epoch), keys_, &pairs_);
}

void RecordSignature::Took(const wire::Message& record) {
  last_made_ = std::max(last_made_, record.made_epoch);
}

}  // namespace ps
}  // namespace pstrain
