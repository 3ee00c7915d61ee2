# The header frame of every pstrain message. Tensor bytes are not in here: each tensor's raw
# float32 (or bfloat16) bytes travel as its own ZeroMQ frame after this one, in the order of its
# struct's `tensors`, so they are never copied into or out of Cap'n Proto. See
# common/wire/message.h.
#
# One envelope, then one protocol's body: the worker/server requests, the host's rendezvous and
# collectives, server-to-server replication, and the replies. Each request type is a struct of
# its own fields, so a field one type may not carry has no place to be written
# (common/wire/codec.cc maps these structs to and from the flat wire::Message).
@0xa556ea14fd02828b;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("pstrain::wire::schema");

enum DType {
  float32 @0;
  # The upper half of a float32 (common/bfloat16.h); the receiver widens it to float32.
  bfloat16 @1;
}

struct TensorMeta {
  name @0 :Text;
  shape @1 :List(Int64);
  dtype @2 :DType;
  # Bytes in this tensor's frame: product(shape) * 4 for float32, * 2 for bfloat16.
  byteLength @3 :UInt64;
}

# One entry of a server's retry cache (ps::PeerState): the last push of a sender's incarnation
# and what its reply said, so a promoted backup answers a retry instead of applying it twice.
struct PushEntry {
  role @0 :Text;
  taskIndex @1 :Int32 = -1;
  incarnation @2 :UInt64;
  sequence @3 :UInt64;
  replyStep @4 :Int64;
  replyValue @5 :Int64;
  replyText @6 :Text;
}

# The chief's proof of a shard map for one client (common/wire/map_proof.h): that client's key
# name and a 32-byte keyed hash only the chief and that client can make.
struct MapProof {
  name @0 :Text;
  tag @1 :Data;
}

# Shard `shard`'s chain: its tasks head first, and the tasks still copying to join it as tail.
struct Chain {
  shard @0 :Int32;
  tasks @1 :List(Int32);
  joining @2 :List(Int32);
}

# Examples of one data chunk a push used (section 6 of docs/replication.md).
struct ChunkUse {
  epoch @0 :Int64;
  chunk @1 :Int64;
  count @2 :Int64;
}

struct Header {
  # wire::kProtocolVersion of the sender; checked first, so it keeps its place in every version.
  version @0 :UInt32;
  # The envelope, every message's: a reply carries its request's id; the sender's role, task
  # and process (a restarted process has a new incarnation); the shard a message is for (-1: the
  # receiving task's own) and the sender's shard map epoch (0: none).
  requestId @1 :UInt64;
  role @2 :Text;
  taskIndex @3 :Int32 = -1;
  incarnation @4 :UInt64;
  shard @5 :Int32 = -1;
  mapEpoch @6 :UInt64;
  body :union {
    worker @7 :WorkerRequest;
    host @8 :HostRequest;
    replication @9 :ReplicationRequest;
    ok @10 :Reply;
    error @11 :Reply;
  }
}

# Workers, evaluators and the chief to a parameter server (ps/permissions.h says who may send
# which); the host's hub takes their heartbeat too.
struct WorkerRequest {
  union {
    register @0 :Register;
    pull @1 :Pull;
    push @2 :Push;
    barrier @3 :Barrier;
    heartbeat @4 :Heartbeat;
    checkpoint @5 :Checkpoint;
    shutdown @6 :Shutdown;
    restore @7 :Restore;
    shardMap @8 :ShardMap;
    dataLease @9 :DataLease;
    rowPull @10 :RowPull;
    rowPush @11 :RowPush;
  }
}

# The chief's initial values at global step `step`; without tensors, anyone's question whether
# the variables are ready.
struct Register {
  step @0 :Int64;
  tensors @1 :List(TensorMeta);
}

# The variables wanted (all when empty), and the dtype the reply's tensors travel in
# (--push_dtype=bf16).
struct Pull {
  names @0 :List(Text);
  dtype @1 :DType;
}

struct Push {
  # The global step the gradients came from.
  step @0 :Int64;
  # The sender's count of pushes to this server in this incarnation, so a retried push is
  # recognised and applied once.
  sequence @1 :UInt64;
  # Parts of the same step still to come after this one (0: the step's last or only part).
  parts @2 :Int64;
  # Gradients, and the values named in `assigns` (batch-norm moving statistics).
  tensors @3 :List(TensorMeta);
  assigns @4 :List(Text);
  # To shard 0: the data chunks' examples this step used.
  uses @5 :List(ChunkUse);
}

struct Barrier {
  name @0 :Text;
  participants @1 :Int64;
}

struct Heartbeat {
  # "goodbye" on a clean exit, else empty.
  text @0 :Text;
}

# The chief: save your shard of global step `step` under `trainDir`.
struct Checkpoint {
  step @0 :Int64;
  trainDir @1 :Text;
}

# The chief: training is over, exit cleanly.
struct Shutdown {}

# The chief: restore your shard of this committed checkpoint step.
struct Restore {
  step @0 :Int64;
}

# The chief sets the map `chains` of epoch mapEpoch, with its proofs; anyone else gets it (both
# lists empty).
struct ShardMap {
  chains @0 :List(Chain);
  mapProofs @1 :List(MapProof);
}

# A worker to shard 0's head: lease a data chunk of `epoch` (docs/replication.md section 6).
struct DataLease {
  epoch @0 :Int64;
}

# The rows of one embedding table that a server owns (common/row_owner.h). The ids are not in
# here: they travel as one frame of little-endian int64 right after this header, before any
# tensor frame, so a batch of many ids costs no list to build or walk.
struct RowIds {
  # The ids in that frame: its bytes are 8 per id.
  count @0 :UInt64;
}

# Worker or evaluator: the rows of these ids (repeats allowed), in the order asked. A worker's
# pull creates the rows its batch touches and counts them towards admission; a read-only one (an
# evaluation's; an evaluator's always) only looks them up.
struct RowPull {
  table @0 :Text;
  ids @1 :RowIds;
  readOnly @2 :Bool;
}

# Worker: one optimizer step on the rows of these ids.
struct RowPush {
  table @0 :Text;
  # The global step the gradients came from.
  step @1 :Int64;
  # The sender's count of row pushes to this server in this incarnation, so a retry is applied
  # once.
  sequence @2 :UInt64;
  ids @3 :RowIds;
  # One tensor, [ids, dimension]: a gradient row per id.
  tensors @4 :List(TensorMeta);
}

# The workers of one host to their hub (worker/distributed/collectives/).
struct HostRequest {
  union {
    storeSet @0 :StoreSet;
    storeGet @1 :StoreGet;
    collective @2 :Collective;
  }
}

# Rendezvous (zmq_store.h): set keys[0] to `value` once.
struct StoreSet {
  keys @0 :List(Text);
  value @1 :Text;
}

# Get keys[0] (reply: value 1 and the text once set, value 0 before).
struct StoreGet {
  keys @0 :List(Text);
}

# A rank's part of collective call number `call` (host_hub.h): operation `op` over n elements,
# a broadcast's root rank, and the rank's input as tensors[0].
struct Collective {
  op @0 :Text;
  n @1 :Int64;
  call @2 :Int64;
  root @3 :Int32;
  tensors @4 :List(TensorMeta);
}

# Between the servers of a shard's chain (docs/replication.md, section 3). Records are numbered
# apart from steps: a stale drop, or one part of an async step, is a record that is no step.
struct ReplicationRequest {
  union {
    replicate @0 :Replicate;
    replicaCopy @1 :ReplicaCopy;
  }
}

# Predecessor to successor: one record of the shard.
struct Replicate {
  # The record's number, the step it was applied at, and the shard's global step after it.
  record @0 :UInt64;
  appliedAt @1 :Int64;
  stepAfter @2 :Int64;
  # Prepared gradients, then the values named in `assigns`.
  tensors @3 :List(TensorMeta);
  assigns @4 :List(Text);
  # The retry-cache entries it answers, and its data-ledger changes.
  pushes @5 :List(PushEntry);
  uses @6 :List(ChunkUse);
  # The chain's link before this record (chain_link.h), 32 bytes.
  link @7 :Data;
  # The map epoch its head made it under, and the head's tags of it, one per server key that
  # may take it (record_tag.h); both pass down the chain unchanged.
  madeEpoch @8 :UInt64;
  tags @9 :List(MapProof);
  # The head's digest of the shard's state after this record (ps/state_stamps.h), 32 bytes, or
  # none; its tags cover it.
  stateDigest @10 :Data;
}

# Tail to joining task: a snapshot of the shard at record `record`.
struct ReplicaCopy {
  record @0 :UInt64;
  globalStep @1 :Int64;
  # <var> and <var>/<slot>.
  tensors @2 :List(TensorMeta);
  # The whole retry cache, and the ledger.
  pushes @3 :List(PushEntry);
  uses @4 :List(ChunkUse);
  # The train config's fingerprint: replicas must run the same.
  fingerprint @5 :Text;
  # The chain's link after the copied records.
  link @6 :Data;
}

# Every reply, ok or error: what servers, hubs and stores answer with.
struct Reply {
  # The global step (pulls, pushes, heartbeats: every server reply), a register's readiness (1),
  # a push's stale count, a lease's chunk size, a store get's found (1).
  step @0 :Int64;
  value @1 :Int64;
  # An error's message; "kept", "initialised", "restored", a checkpoint's path, a stored value.
  text @2 :Text;
  # A pull's values, a collective's output.
  tensors @3 :List(TensorMeta);
  # The record or copy acknowledged; a lease's first example.
  sequence @4 :UInt64;
  # Register reply: the checkpoint steps the server holds whole.
  steps @5 :List(Int64);
  # Data lease: {epoch, chunk, examples already used}.
  uses @6 :List(ChunkUse);
  # Shard map get: the map, its proofs, and per shard the joiners its tail found caught up.
  chains @7 :List(Chain);
  mapProofs @8 :List(MapProof);
  caughtUp @9 :List(Chain);
  # An error's pstrain::StatusCode (0 = unset); an ok carries none.
  errorCode @10 :UInt16;
}
