// The messages between workers, evaluators, parameter servers and a host's hub. On the wire a
// message is one Cap'n Proto frame (schema: common/wire/pstrain.capnp) followed by one ZeroMQ frame
// per tensor holding its raw float32 (or bfloat16) bytes, so tensor data is never copied into or
// out of the header. In memory a Message is flat (one struct for every type, as the code passes
// it around); on the wire each protocol has its own structs: the worker requests, the host's,
// replication, and replies (codec.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"

namespace pstrain {
namespace wire {

// Bumped on any incompatible change; a peer speaking another version is refused by name.
// 3: replication (docs/replication.md); 4: the chief proves shard maps (map_proof.h);
// 5: replication records and copies carry the chain's link (chain_link.h); 6: one schema per
// protocol, a struct per request type (pstrain.capnp); 7: tensor frames may be bfloat16, and a
// pull may ask for its reply in it (--push_dtype=bf16); 8: embedding-table rows (row pull, row
// push), their ids in a frame of their own; 9: a record carries the epoch its head made it under
// and the head's tags of its content (record_tag.h); 10: a record may carry the digest of the
// shard's state after it, which the head's tags cover (ps/state_stamps.h)
constexpr uint32_t kProtocolVersion = 10;

// Each request type has its own fields (besides the envelope every message carries: role,
// task_index, incarnation, request_id, shard, map_epoch), its struct's in pstrain.capnp: Encode
// refuses a message carrying a field its type's struct lacks, naming it, and Decode can only
// produce a type's own fields, so no field means two things. The worker protocol: register to
// shutdown, restore, shard map, data lease; the host's: store set and get, collective;
// replication: replicate, replica copy; replies: ok, error.
enum class MessageType {
  kRegister,    // step, tensors: the chief's initial values at that global step; without them,
                // anyone's question whether the variables are ready (reply: value, steps)
  kPull,        // names: the variables wanted (all when empty) -> values and the global step;
                // pull_dtype: the reply's tensors in bfloat16 (--push_dtype=bf16)
  kPush,        // step: the version the gradients came from; sequence: the sender's count of
                // pushes to this server; tensors: gradients, and the values named in `assigns`;
                // value: parts of the same step still to come after this one (0: the step's
                // last or only part; async servers count a step when it arrives)
  kBarrier,     // text: the barrier's name; value: how many participants it waits for
  kHeartbeat,   // text: "goodbye" on a clean exit, else empty
  kCheckpoint,  // chief -> server: step, text (train_dir): save your shard of that step
  kShutdown,    // chief -> server: training is over, exit cleanly
  kOk,          // a reply with nothing more to say (or with tensors/step for a pull)
  kError,       // a reply naming what was wrong (`text`); the request changed nothing
  // Rendezvous of the workers on one host (worker/distributed/collectives/zmq_store.h): set
  // names[0] to `text` once; get names[0] (reply: value 1 and the text once set, value 0 before).
  kStoreSet,
  kStoreGet,
  // A rank's part of a collective over the host's hub (worker/distributed/collectives/host_hub.h):
  // `text` the operation, `value` n, `step` the call's number within the group, `root` the
  // broadcast root, tensors[0] the rank's input; the reply carries its output in tensors[0].
  kCollective,
  // chief -> server: step: restore your shard of this committed checkpoint step.
  kRestore,
  // Replication (docs/replication.md, section 3); a server answers them only once its chain
  // code is built, and refuses them until then.
  // predecessor -> successor: one record of `shard` (section 2): sequence (the shard's step
  // after it), step (the step it was applied at), tensors (prepared gradients, then the values
  // named in `assigns`), pushes (the retry-cache entries it answers), uses (ledger changes),
  // link, made_epoch, record_tags, state_digest (the head's stamp of the state after it, or none).
  kReplicate,
  // tail -> joining task: a snapshot of `shard` at `sequence`: tensors <var> and <var>/<slot>,
  // pushes (the whole retry cache), uses (the ledger), text (the train config's fingerprint).
  kReplicaCopy,
  // chief -> server: set the map `chains` of epoch map_epoch; anyone else: get it (no fields).
  kShardMap,
  // worker -> shard 0's head: value: the epoch to lease a data chunk of (section 6). Reply kOk:
  // uses = {ChunkUse{epoch, chunk, count: its examples already used, to skip}}, value = the
  // chunk's examples, sequence = its first example's index in the epoch (ps/server_data_lease.cc).
  kDataLease,
  // Embedding-table rows, each on the server that owns its id (common/row_owner.h). text: the
  // table; ids: the rows, each >= 0, travelling as one frame of int64 before the tensor frames.
  // worker or evaluator -> server: the rows of `ids` (repeats allowed). Reply kOk: tensors[0]
  // [ids.size(), dimension], the rows in the order asked.
  kRowPull,
  // worker -> server: step (the version the gradients came from), sequence (the sender's count
  // of row pushes to this server in its incarnation), tensors[0] the gradients [ids.size(),
  // dimension], one row per id.
  kRowPush,
};

const char* MessageTypeName(MessageType type);

// How a tensor's frame holds its elements. A Tensor is float32 whatever the frame: Encode rounds
// to bfloat16 (common/bfloat16.h) and Decode widens back, exactly, so a receiver never sees it.
enum class TensorDType { kFloat32, kBfloat16 };

struct NamedTensor {
  std::string name;
  Tensor tensor;
  TensorDType dtype = TensorDType::kFloat32;  // on the wire; Decode says what came
};

// The bytes of `t`'s frame: 4 an element, 2 in bfloat16.
size_t WireBytes(const NamedTensor& t);

// One entry of a server's retry cache: a sender's last push and its reply's step, value, text.
struct PushEntry {
  std::string role;
  int32_t task_index = -1;
  uint64_t incarnation = 0;
  uint64_t sequence = 0;
  int64_t reply_step = 0;
  int64_t reply_value = 0;
  std::string reply_text;
};
bool operator==(const PushEntry& a, const PushEntry& b);

// A shard's chain: its tasks head first, and the tasks copying to join it as its tail.
struct Chain {
  int32_t shard = 0;
  std::vector<int32_t> tasks;
  std::vector<int32_t> joining;
};
bool operator==(const Chain& a, const Chain& b);

// The chief's proof of a shard map for the client whose key is `name` (map_proof.h); also a
// head's tag of a replication record for the server whose key is `name` (record_tag.h).
struct MapProof {
  std::string name;
  std::string tag;  // 32 bytes
};

// `count` examples of chunk `chunk` of data epoch `epoch`, used by one push.
struct ChunkUse {
  int64_t epoch = 0;
  int64_t chunk = 0;
  int64_t count = 0;
};
bool operator==(const ChunkUse& a, const ChunkUse& b);

struct Message {
  MessageType type = MessageType::kOk;
  uint64_t request_id = 0;         // a reply carries its request's id
  std::string role;                // sender: "worker", "evaluator", "ps", "chief"
  int32_t task_index = -1;         // sender's task index
  int64_t step = 0;                // pull reply: global step; push: version the gradient came from
  int64_t value = 0;  // barrier: participants; push: parts still to come; row pull: 1 read-only
  std::string text;                // error message, barrier name, checkpoint directory
  std::vector<std::string> names;  // pull: the variables wanted
  std::vector<int64_t> ids;        // row pull and push: the rows' ids (their own frame)
  TensorDType pull_dtype = TensorDType::kFloat32;  // pull: the dtype its reply's tensors travel in
  std::vector<NamedTensor> tensors;  // push: gradients; pull reply: values
  // kError: the kind of failure, so a caller can tell NotFound from InvalidArgument (kOk: unset).
  StatusCode error_code = StatusCode::kOk;
  // The sender process's random id for its lifetime (a restarted process has a new one); a
  // heartbeat reply carries the server's, so clients notice a restart.
  uint64_t incarnation = 0;
  // Push: the sender's count of pushes to this server within its incarnation; a retried push
  // (same sender, incarnation and sequence) is applied once.
  uint64_t sequence = 0;
  // Push: the names of pushed tensors that are values to assign (batch-norm moving statistics),
  // not gradients.
  std::vector<std::string> assigns;
  int32_t root = 0;                  // collective: the rank whose input a broadcast sends
  std::vector<int64_t> steps;        // register reply: the checkpoint steps the server holds whole
  int32_t shard = -1;                // the shard a request is for (-1: the receiving task's own)
  uint64_t map_epoch = 0;            // the sender's shard map epoch (0: none)
  std::vector<PushEntry> pushes;     // replicate, replica copy: retry-cache entries
  std::vector<Chain> chains;         // shard map set: the chains of epoch map_epoch
  std::vector<ChunkUse> uses;        // push, replicate, replica copy: data-ledger changes
  std::vector<MapProof> map_proofs;  // shard map set and get reply: the chief's proofs
  std::vector<Chain> caught_up;      // shard map get reply: joiners found caught up, by shard
  // Replicate: the chain's link before this record; replica copy: after the copied records
  // (chain_link.h). 32 bytes.
  std::string link;
  // Replicate: the map epoch under which the shard's head made the record (the envelope's
  // map_epoch is each sender's own), and the head's tags of it, one per server key that may take
  // it (record_tag.h). Both pass down the chain unchanged.
  uint64_t made_epoch = 0;
  std::vector<MapProof> record_tags;
  // Replicate: the head's digest of the shard's state after this record (ps/state_stamps.h),
  // 32 bytes, on at most one record a second while a joiner is listed; empty on the others.
  std::string state_digest;
};

constexpr size_t kStateDigestBytes = 32;

// A non-zero id for this process, drawn once, that grows with the process's start time: of two
// processes of one role and task, the one started later has the larger id.
uint64_t ProcessIncarnation();

// A kError reply to `request` carrying `status`'s code and message.
Message ErrorReply(const Message& request, const Status& status);

// The failure a kError reply stands for (kInternal when its code was unset); OK for any other
// type.
Status StatusOfReply(const Message& reply);

// Limits a receiver enforces before buffering a message whole.
struct MessageLimits {
  size_t max_header_bytes = 1 << 20;
  size_t max_frames = 4096;
  size_t max_tensor_bytes = size_t{1} << 32;
  size_t max_total_bytes = size_t{1} << 33;
};

}  // namespace wire
}  // namespace pstrain
