// The fields that several protocols' structs share, written and read one way (codec_body.h).
#include <set>
#include <utility>

#include "common/wire/codec_body.h"

namespace pstrain {
namespace wire {
namespace codec {
namespace {

// "a pull", "an ok": error messages name a type as a thing.
std::string Article(const std::string& type) {
  return (type.find_first_of("aeiou") == 0 ? "an " : "a ") + type;
}

template <typename T>
Status CheckEntryCount(typename capnp::List<T>::Reader list, const char* what, const Received& r) {
  constexpr size_t kEntryBytes =
      sizeof(capnp::word) * (T::_capnpPrivate::dataWordSize + T::_capnpPrivate::pointerCount);
  const size_t header_bytes = r.frames[0].size;
  if (size_t{list.size()} * kEntryBytes <= header_bytes) return Status::OK();
  return InvalidArgument(StrCat("the ", MessageTypeName(r.m->type), " from ", r.sender, " lists ",
                                list.size(), " ", what, " in a ", header_bytes,
                                "-byte header, which holds at most ", header_bytes / kEntryBytes,
                                " (", kEntryBytes, " bytes each)"));
}

}  // namespace

Status Written::Unwritten() const {
  const std::pair<Field, bool> carried[] = {{kStep, m_.step != 0},
                                            {kValue, m_.value != 0},
                                            {kText, !m_.text.empty()},
                                            {kNames, !m_.names.empty()},
                                            {kTensors, !m_.tensors.empty()},
                                            {kSequence, m_.sequence != 0},
                                            {kAssigns, !m_.assigns.empty()},
                                            {kRoot, m_.root != 0},
                                            {kSteps, !m_.steps.empty()},
                                            {kErrorCode, m_.error_code != StatusCode::kOk},
                                            {kPushes, !m_.pushes.empty()},
                                            {kChains, !m_.chains.empty()},
                                            {kUses, !m_.uses.empty()},
                                            {kMapProofs, !m_.map_proofs.empty()},
                                            {kCaughtUp, !m_.caught_up.empty()},
                                            {kLink, !m_.link.empty()},
                                            {kPullDtype, m_.pull_dtype != TensorDType::kFloat32},
                                            {kIds, !m_.ids.empty()},
                                            {kMadeEpoch, m_.made_epoch != 0},
                                            {kRecordTags, !m_.record_tags.empty()},
                                            {kStateDigest, !m_.state_digest.empty()}};
  // As wire::Message names them.
  const char* names[] = {
      "step",     "value", "text",      "names",  "tensors",   "sequence",   "assigns",
      "root",     "steps", "errorCode", "pushes", "chains",    "uses",       "mapProofs",
      "caughtUp", "link",  "pullDtype", "ids",    "madeEpoch", "recordTags", "stateDigest"};
  static_assert(sizeof(names) / sizeof(names[0]) == sizeof(carried) / sizeof(carried[0]));
  for (const auto& [field, set] : carried) {
    if (set && !(written_ & (1u << field))) {
      return InvalidArgument(StrCat(Article(MessageTypeName(m_.type)), " carries no '",
                                    names[field], "' (its struct in pstrain.capnp has no place ",
                                    "for it: another type's field)"));
    }
  }
  return Status::OK();
}

bool ValidName(const std::string& name) {
  return !name.empty() && name.find('\0') == std::string::npos;
}

std::string TextOf(capnp::Text::Reader text) { return std::string(text.begin(), text.size()); }
capnp::Text::Reader AsText(const std::string& s) { return capnp::Text::Reader(s.data(), s.size()); }
std::string BytesOf(capnp::Data::Reader data) {
  return std::string(reinterpret_cast<const char*>(data.begin()), data.size());
}
capnp::Data::Reader AsData(const std::string& s) {
  return kj::arrayPtr(reinterpret_cast<const kj::byte*>(s.data()), s.size());
}

Status WriteNames(const std::vector<std::string>& names, const char* what, MessageType type,
                  capnp::List<capnp::Text>::Builder list) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (!ValidName(names[i])) {
      return InvalidArgument(StrCat(what, " ", i, " of the ", MessageTypeName(type),
                                    " is empty or holds a NUL byte; variable names must be "
                                    "non-empty, without NUL"));
    }
    list.set(i, AsText(names[i]));
  }
  return Status::OK();
}

Status ReadNames(capnp::List<capnp::Text>::Reader list, const char* what, const Received& r,
                 std::vector<std::string>* names) {
  names->reserve(list.size());
  for (uint32_t i = 0; i < list.size(); ++i) {
    std::string name = TextOf(list[i]);
    if (!ValidName(name)) {
      return InvalidArgument(StrCat(what, " ", i, " of ", list.size(), " in the ",
                                    MessageTypeName(r.m->type), " from ", r.sender,
                                    " is empty or holds a NUL byte; variable names must be "
                                    "non-empty, without NUL"));
    }
    names->push_back(std::move(name));
  }
  return Status::OK();
}

Status CheckAssigns(const Message& m) {
  if (m.assigns.empty()) return Status::OK();
  std::set<std::string> pushed;
  for (const NamedTensor& t : m.tensors) pushed.insert(t.name);
  for (const std::string& a : m.assigns) {
    if (!pushed.count(a)) {
      return InvalidArgument(StrCat("the ", MessageTypeName(m.type), " assigns '", a,
                                    "' but carries no tensor of that name"));
    }
  }
  return Status::OK();
}

Status WritePushes(const std::vector<PushEntry>& pushes, MessageType type,
                   capnp::List<schema::PushEntry>::Builder list) {
  for (size_t i = 0; i < pushes.size(); ++i) {
    const PushEntry& e = pushes[i];
    // A role is echoed into logs, where a NUL byte cuts it.
    if (e.role.find('\0') != std::string::npos) {
      return InvalidArgument(StrCat("push entry ", i, " of the ", MessageTypeName(type),
                                    " names a role holding a NUL byte"));
    }
    auto p = list[i];
    p.setRole(AsText(e.role));
    p.setTaskIndex(e.task_index);
    p.setIncarnation(e.incarnation);
    p.setSequence(e.sequence);
    p.setReplyStep(e.reply_step);
    p.setReplyValue(e.reply_value);
    p.setReplyText(AsText(e.reply_text));
  }
  return Status::OK();
}

Status ReadPushes(capnp::List<schema::PushEntry>::Reader list, const Received& r) {
  RETURN_IF_ERROR(CheckEntryCount<schema::PushEntry>(list, "push entries", r));
  r.m->pushes.reserve(list.size());
  for (uint32_t i = 0; i < list.size(); ++i) {
    const auto p = list[i];
    PushEntry e;
    e.role = TextOf(p.getRole());
    if (e.role.find('\0') != std::string::npos) {
      return InvalidArgument(StrCat("push entry ", i, " of ", list.size(), " in the ",
                                    MessageTypeName(r.m->type), " from ", r.sender,
                                    " names a role holding a NUL byte"));
    }
    e.task_index = p.getTaskIndex();
    e.incarnation = p.getIncarnation();
    e.sequence = p.getSequence();
    e.reply_step = p.getReplyStep();
    e.reply_value = p.getReplyValue();
    e.reply_text = TextOf(p.getReplyText());
    r.m->pushes.push_back(std::move(e));
  }
  return Status::OK();
}

void WriteChains(const std::vector<Chain>& chains, capnp::List<schema::Chain>::Builder list) {
  for (size_t i = 0; i < chains.size(); ++i) {
    const Chain& c = chains[i];
    auto chain = list[i];
    chain.setShard(c.shard);
    auto tasks = chain.initTasks(c.tasks.size());
    for (size_t t = 0; t < c.tasks.size(); ++t) tasks.set(t, c.tasks[t]);
    auto joining = chain.initJoining(c.joining.size());
    for (size_t t = 0; t < c.joining.size(); ++t) joining.set(t, c.joining[t]);
  }
}

Status ReadChains(capnp::List<schema::Chain>::Reader list, const char* what, const Received& r,
                  std::vector<Chain>* chains) {
  RETURN_IF_ERROR(CheckEntryCount<schema::Chain>(list, what, r));
  for (const auto chain : list) {
    Chain c;
    c.shard = chain.getShard();
    for (int32_t t : chain.getTasks()) c.tasks.push_back(t);
    for (int32_t t : chain.getJoining()) c.joining.push_back(t);
    chains->push_back(std::move(c));
  }
  return Status::OK();
}

void WriteUses(const std::vector<ChunkUse>& uses, capnp::List<schema::ChunkUse>::Builder list) {
  for (size_t i = 0; i < uses.size(); ++i) {
    list[i].setEpoch(uses[i].epoch);
    list[i].setChunk(uses[i].chunk);
    list[i].setCount(uses[i].count);
  }
}

Status ReadUses(capnp::List<schema::ChunkUse>::Reader list, const Received& r) {
  RETURN_IF_ERROR(CheckEntryCount<schema::ChunkUse>(list, "chunk uses", r));
  for (const auto use : list) {
    r.m->uses.push_back({use.getEpoch(), use.getChunk(), use.getCount()});
  }
  return Status::OK();
}

void WriteMapProofs(const std::vector<MapProof>& proofs,
                    capnp::List<schema::MapProof>::Builder list) {
  for (size_t i = 0; i < proofs.size(); ++i) {
    list[i].setName(AsText(proofs[i].name));
    list[i].setTag(AsData(proofs[i].tag));
  }
}

Status ReadMapProofs(capnp::List<schema::MapProof>::Reader list, const Received& r) {
  return ReadKeyTags(list, "map proofs", r, &r.m->map_proofs);
}

Status ReadKeyTags(capnp::List<schema::MapProof>::Reader list, const char* what, const Received& r,
                   std::vector<MapProof>* tags) {
  RETURN_IF_ERROR(CheckEntryCount<schema::MapProof>(list, what, r));
  for (const auto proof : list) {
    tags->push_back({TextOf(proof.getName()), BytesOf(proof.getTag())});
  }
  return Status::OK();
}

Status UnknownType(const char* what, unsigned which, const Received& r, const char* first,
                   unsigned last, const char* last_name) {
  return InvalidArgument(StrCat("unknown ", what, " ", which, " from ", r.sender, "; known are 0 (",
                                first, ") to ", last, " (", last_name, ")"));
}

}  // namespace codec
}  // namespace wire
}  // namespace pstrain
