# The header frame of every pstrain message. Tensor bytes are not in here: each tensor's raw
# float32 bytes travel as its own ZeroMQ frame after this one, in the order of `tensors`, so
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
}

enum DType {
  float32 @0;
}

struct TensorMeta {
  name @0 :Text;
  shape @1 :List(Int64);
  dtype @2 :DType;
  # Bytes in this tensor's frame: product(shape) * 4 for float32.
  byteLength @3 :UInt64;
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
}
