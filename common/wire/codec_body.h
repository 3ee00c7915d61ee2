// What codec.cc shares with the protocols' files (codec_worker.cc, codec_host.cc,
// codec_replication.cc, codec_reply.cc): each writes the flat Message into its protocol's structs
// and reads them back, one function per protocol and direction. Internal to common/wire.
#pragma once

#include <capnp/list.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "common/wire/codec.h"
#include "common/wire/message.h"
#include "common/wire/pstrain.capnp.h"

namespace pstrain {
namespace wire {
namespace codec {

template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream s;
  (s << ... << args);
  return s.str();
}

// The message being encoded, read only through these accessors: each marks its field written,
// so that Encode refuses a message carrying a field that its type's struct had no place for.
class Written {
 public:
  explicit Written(const Message& m) : m_(m) {}
  MessageType type() const { return m_.type; }
  int64_t step() { return Take(kStep, m_.step); }
  int64_t value() { return Take(kValue, m_.value); }
  const std::string& text() { return Take(kText, m_.text); }
  const std::vector<std::string>& names() { return Take(kNames, m_.names); }
  const std::vector<NamedTensor>& tensors() { return Take(kTensors, m_.tensors); }
  uint64_t sequence() { return Take(kSequence, m_.sequence); }
  const std::vector<std::string>& assigns() { return Take(kAssigns, m_.assigns); }
  int32_t root() { return Take(kRoot, m_.root); }
  const std::vector<int64_t>& steps() { return Take(kSteps, m_.steps); }
  StatusCode error_code() { return Take(kErrorCode, m_.error_code); }
  const std::vector<PushEntry>& pushes() { return Take(kPushes, m_.pushes); }
  const std::vector<Chain>& chains() { return Take(kChains, m_.chains); }
  const std::vector<ChunkUse>& uses() { return Take(kUses, m_.uses); }
  const std::vector<MapProof>& map_proofs() { return Take(kMapProofs, m_.map_proofs); }
  const std::vector<Chain>& caught_up() { return Take(kCaughtUp, m_.caught_up); }
  const std::string& link() { return Take(kLink, m_.link); }
  TensorDType pull_dtype() { return Take(kPullDtype, m_.pull_dtype); }
  const std::vector<int64_t>& ids() { return Take(kIds, m_.ids); }
  uint64_t made_epoch() { return Take(kMadeEpoch, m_.made_epoch); }
  const std::vector<MapProof>& record_tags() { return Take(kRecordTags, m_.record_tags); }
  const std::string& state_digest() { return Take(kStateDigest, m_.state_digest); }

  // InvalidArgument naming the first field the message carries (holds a value other than its
  // default) that was not written: "a pull carries no 'sequence' (...)".
  Status Unwritten() const;

 private:
  enum Field : unsigned {
    kStep,
    kValue,
    kText,
    kNames,
    kTensors,
    kSequence,
    kAssigns,
    kRoot,
    kSteps,
    kErrorCode,
    kPushes,
    kChains,
    kUses,
    kMapProofs,
    kCaughtUp,
    kLink,
    kPullDtype,
    kIds,
    kMadeEpoch,
    kRecordTags,
    kStateDigest,
  };
  template <typename T>
  const T& Take(Field f, const T& field) {
    written_ |= 1u << f;
    return field;
  }

  const Message& m_;
  unsigned written_ = 0;
};

// A message being decoded: who sent it (for errors), its frames and limits, and the message the
// body's fields go into.
struct Received {
  const std::vector<Frame>& frames;
  const MessageLimits& limits;
  std::string sender;
  Message* m;
  // Frames between the header and the tensor frames: 1 for the row types' ids frame.
  size_t leading_frames = 0;
};

// Text both ways, every byte: cStr() and the implicit conversion from std::string stop at a NUL.
std::string TextOf(capnp::Text::Reader text);
capnp::Text::Reader AsText(const std::string& s);
std::string BytesOf(capnp::Data::Reader data);
capnp::Data::Reader AsData(const std::string& s);

// Variable and tensor names end up in logs and checkpoint indexes, where a NUL byte cuts them.
bool ValidName(const std::string& name);

// Variable names (`what`: "name", "assign", "key"), each ValidName.
Status WriteNames(const std::vector<std::string>& names, const char* what, MessageType type,
                  capnp::List<capnp::Text>::Builder list);
Status ReadNames(capnp::List<capnp::Text>::Reader list, const char* what, const Received& r,
                 std::vector<std::string>* names);

// The tensors' metadata, their frames appended to `frames` (codec.cc: one place for the tensor
// frames' format: float32, or bfloat16 rounded on write and widened on read).
Status WriteTensors(const std::vector<NamedTensor>& tensors, MessageType type,
                    capnp::List<schema::TensorMeta>::Builder metas, std::vector<Frame>* frames);
Status ReadTensors(capnp::List<schema::TensorMeta>::Reader metas, const Received& r);

// A row pull's or push's table and ids: the ids as one frame of little-endian int64, appended
// to `frames` before any tensor frame (a copy of the ids, shared by the frame). Read, the frame
// must hold exactly `count` ids, each >= 0, within max_tensor_bytes; a row push must carry one
// tensor, of the table's name, with a row per id.
Status WriteRows(const std::string& table, const std::vector<int64_t>& ids, MessageType type,
                 schema::RowIds::Builder meta, std::vector<Frame>* frames);
Status ReadRows(capnp::Text::Reader table, schema::RowIds::Reader meta, Received& r);
// Both ways: what is written is what a reader takes.
Status CheckRowPush(const std::string& table, size_t ids, const std::vector<NamedTensor>& tensors,
                    const std::string& sender);

// The schema's dtype, or an error naming `what`, the value and the known ones; and back.
Result<TensorDType> DTypeOf(schema::DType dtype, const std::string& what);
schema::DType SchemaDType(TensorDType dtype);

// A push's or record's assigns must name tensors it carries (else they would assign nothing).
Status CheckAssigns(const Message& m);

// The struct lists: retry-cache entries (roles without NUL), chains, chunk uses, map proofs.
// Read, a list whose elements the writer shrank (Cap'n Proto allows it, the reader sees
// defaults) is refused unless each entry had room for a whole one: a few kilobytes of header
// must not become megabytes.
Status WritePushes(const std::vector<PushEntry>& pushes, MessageType type,
                   capnp::List<schema::PushEntry>::Builder list);
Status ReadPushes(capnp::List<schema::PushEntry>::Reader list, const Received& r);
void WriteChains(const std::vector<Chain>& chains, capnp::List<schema::Chain>::Builder list);
Status ReadChains(capnp::List<schema::Chain>::Reader list, const char* what, const Received& r,
                  std::vector<Chain>* chains);
void WriteUses(const std::vector<ChunkUse>& uses, capnp::List<schema::ChunkUse>::Builder list);
Status ReadUses(capnp::List<schema::ChunkUse>::Reader list, const Received& r);
void WriteMapProofs(const std::vector<MapProof>& proofs,
                    capnp::List<schema::MapProof>::Builder list);
Status ReadMapProofs(capnp::List<schema::MapProof>::Reader list, const Received& r);
// Key-named tags (map proofs, a record's tags) into `tags`; `what` names them in errors.
Status ReadKeyTags(capnp::List<schema::MapProof>::Reader list, const char* what, const Received& r,
                   std::vector<MapProof>* tags);

// "unknown <what> 12 from worker 1; known are 0 (register) to 9 (data lease)".
Status UnknownType(const char* what, unsigned which, const Received& r, const char* first,
                   unsigned last, const char* last_name);

// Each protocol's structs, written from and read into the flat message.
Status WriteWorkerRequest(Written& w, schema::WorkerRequest::Builder b, std::vector<Frame>* frames);
Status ReadWorkerRequest(schema::WorkerRequest::Reader b, Received& r);
Status WriteHostRequest(Written& w, schema::HostRequest::Builder b, std::vector<Frame>* frames);
Status ReadHostRequest(schema::HostRequest::Reader b, Received& r);
Status WriteReplicationRequest(Written& w, schema::ReplicationRequest::Builder b,
                               std::vector<Frame>* frames);
Status ReadReplicationRequest(schema::ReplicationRequest::Reader b, Received& r);
// Ok and error replies share one struct; only an error carries a code.
Status WriteReply(Written& w, schema::Reply::Builder b, std::vector<Frame>* frames);
Status ReadReply(schema::Reply::Reader b, MessageType type, Received& r);

}  // namespace codec
}  // namespace wire
}  // namespace pstrain
