#include "common/wire/message_fields.h"

#include <set>
#include <string>

namespace pstrain {
namespace wire {

namespace {

enum Field : unsigned {
  kStep = 1 << 0,
  kValue = 1 << 1,
  kText = 1 << 2,
  kNames = 1 << 3,
  kTensors = 1 << 4,
  kSequence = 1 << 5,
  kAssigns = 1 << 6,
  kRoot = 1 << 7,
  kSteps = 1 << 8,
  kErrorCode = 1 << 9,
  kPushes = 1 << 10,
  kChains = 1 << 11,
  kUses = 1 << 12,
  kMapProofs = 1 << 13,
  kCaughtUp = 1 << 14,  // a reply's alone
  kLink = 1 << 15,
  kPullDtype = 1 << 16,
};

// The fields a request of `type` may carry; false for the reply types.
bool FieldsOf(MessageType type, unsigned* fields) {
  switch (type) {
    case MessageType::kRegister:
      *fields = kStep | kTensors;
      return true;
    case MessageType::kPull:
      *fields = kNames | kPullDtype;
      return true;
    case MessageType::kPush:
      *fields = kStep | kSequence | kTensors | kAssigns | kValue | kUses;
      return true;
    case MessageType::kBarrier:
      *fields = kText | kValue;
      return true;
    case MessageType::kHeartbeat:
      *fields = kText;
      return true;
    case MessageType::kCheckpoint:
      *fields = kStep | kText;
      return true;
    case MessageType::kShutdown:
      *fields = 0;
      return true;
    case MessageType::kStoreSet:
      *fields = kNames | kText;
      return true;
    case MessageType::kStoreGet:
      *fields = kNames;
      return true;
    case MessageType::kCollective:
      *fields = kText | kValue | kStep | kRoot | kTensors;
      return true;
    case MessageType::kRestore:
      *fields = kStep;
      return true;
    // A record's `value` is the shard's global step after it, and a copy's the step it holds:
    // records are numbered apart from steps, since a stale drop, or one part of an async step,
    // is a record that is no step (docs/replication.md section 2).
    case MessageType::kReplicate:
      *fields = kStep | kSequence | kTensors | kAssigns | kValue | kPushes | kUses | kLink;
      return true;
    case MessageType::kReplicaCopy:
      *fields = kSequence | kTensors | kValue | kPushes | kUses | kText | kLink;
      return true;
    case MessageType::kShardMap:  // a get carries none
      *fields = kChains | kMapProofs;
      return true;
    case MessageType::kDataLease:
      *fields = kValue;
      return true;
    case MessageType::kOk:
    case MessageType::kError:
      return false;
  }
  return false;
}

}  // namespace

Status CheckRequestFields(const Message& m) {
  unsigned allowed = 0;
  const std::string type = MessageTypeName(m.type);
  if (!FieldsOf(m.type, &allowed)) return InvalidArgument(type + " is a reply, not a request");
  const std::pair<Field, bool> carried[] = {{kStep, m.step != 0},
                                            {kValue, m.value != 0},
                                            {kText, !m.text.empty()},
                                            {kNames, !m.names.empty()},
                                            {kTensors, !m.tensors.empty()},
                                            {kSequence, m.sequence != 0},
                                            {kAssigns, !m.assigns.empty()},
                                            {kRoot, m.root != 0},
                                            {kSteps, !m.steps.empty()},
                                            {kErrorCode, m.error_code != StatusCode::kOk},
                                            {kPushes, !m.pushes.empty()},
                                            {kChains, !m.chains.empty()},
                                            {kUses, !m.uses.empty()},
                                            {kMapProofs, !m.map_proofs.empty()},
                                            {kCaughtUp, !m.caught_up.empty()},
                                            {kLink, !m.link.empty()},
                                            {kPullDtype, m.pull_dtype != TensorDType::kFloat32}};
  const char* names[] = {"step",    "value",     "text",     "names",     "tensors",  "sequence",
                         "assigns", "root",      "steps",    "errorCode", "pushes",   "chains",
                         "uses",    "mapProofs", "caughtUp", "link",      "pullDtype"};
  static_assert(sizeof(names) / sizeof(names[0]) == sizeof(carried) / sizeof(carried[0]));
  for (size_t i = 0; i < sizeof(carried) / sizeof(carried[0]); ++i) {
    if (carried[i].second && !(allowed & carried[i].first)) {
      return InvalidArgument("a " + type + " carries no '" + names[i] + "' (it is another " +
                             "request's field)");
    }
  }
  if (!m.assigns.empty()) {
    std::set<std::string> pushed;
    for (const NamedTensor& t : m.tensors) pushed.insert(t.name);
    for (const std::string& a : m.assigns) {
      if (!pushed.count(a)) {
        return InvalidArgument("the " + type + " assigns '" + a +
                               "' but carries no tensor of that name");
      }
    }
  }
  return Status::OK();
}

}  // namespace wire
}  // namespace pstrain
