# The header frame of every pstrain message. Tensor bytes are not in here: each tensor's raw
# float32 (or bfloat16) bytes travel as its own ZeroMQ frame after this one, in the order of `tensors`, so
# they are never copied into or out of Cap'n Proto. See common/wire/message.h.
@0xa556ea14fd02828b;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("pstrain::wire::schema");

# Same order as wire::MessageType; new values go at the end.
enum MessageType {
  register @0;
  pull @1;
  push @2;
  barrier @3;
  heartbeat @4;
  checkpoint @5;
  shutdown @6;
  ok @7;
  error @8;
  storeSet @9;
  storeGet @10;
  collective @11;
  restore @12;
  # Replication (docs/replication.md section 3).
  replicate @13;
  replicaCopy @14;
  shardMap @15;
  dataLease @16;
}

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
  # wire::kProtocolVersion of the sender; checked first.
  version @0 :UInt32;
  type @1 :MessageType;
  requestId @2 :UInt64;
  role @3 :Text;
  taskIndex @4 :Int32 = -1;
  step @5 :Int64;
  value @6 :Int64;
  text @7 :Text;
  names @8 :List(Text);
  tensors @9 :List(TensorMeta);
  # For type = error: the sender's pstrain::StatusCode (0 = unset).
  errorCode @10 :UInt16;
  # The sender process's random id, fixed for its lifetime: a restarted process has a new one.
  incarnation @11 :UInt64;
  # Push: the sender's count of pushes to this server in this incarnation, so a retried push is
  # recognised and applied once.
  sequence @12 :UInt64;
  # Push: the pushed tensors that are values to assign (batch-norm moving statistics).
  assigns @13 :List(Text);
  # Collective: the rank whose input a broadcast sends.
  root @14 :Int32;
  # Register reply: the checkpoint steps the server holds whole.
  steps @15 :List(Int64);
  # Every message: the shard it is for (-1: the receiving task's own) and the sender's shard
  # map epoch (0: none).
  shard @16 :Int32 = -1;
  mapEpoch @17 :UInt64;
  # Replicate and replicaCopy: the retry-cache entries a record answers, or the whole cache.
  pushes @18 :List(PushEntry);
  # ShardMap set: the chains of the map numbered mapEpoch.
  chains @19 :List(Chain);
  # Push to shard 0, replicate, replicaCopy: data-ledger changes.
  uses @20 :List(ChunkUse);
  # ShardMap set and its get reply: the chief's proofs of the map, one per client key.
  mapProofs @21 :List(MapProof);
  # ShardMap get reply: per shard, the joiners its tail found caught up (for the chief).
  caughtUp @22 :List(Chain);
  link @23 :Data;
  # Pull: the dtype the reply's tensors travel in (--push_dtype=bf16).
  pullDtype @24 :DType;
}
