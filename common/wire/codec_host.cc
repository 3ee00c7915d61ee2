// The host protocol (a host's workers to their hub: worker/distributed/collectives/): the
// rendezvous store's set and get, and each rank's part of a collective.
#include "common/wire/codec_body.h"

namespace pstrain {
namespace wire {
namespace codec {

Status WriteHostRequest(Written& w, schema::HostRequest::Builder b, std::vector<Frame>* frames) {
  const MessageType type = w.type();
  switch (type) {
    case MessageType::kStoreSet: {
      auto p = b.initStoreSet();
      p.setValue(AsText(w.text()));
      return WriteNames(w.names(), "key", type, p.initKeys(w.names().size()));
    }
    case MessageType::kStoreGet:
      return WriteNames(w.names(), "key", type, b.initStoreGet().initKeys(w.names().size()));
    case MessageType::kCollective: {
      auto p = b.initCollective();
      p.setOp(AsText(w.text()));
      p.setN(w.value());
      p.setCall(w.step());
      p.setRoot(w.root());
      return WriteTensors(w.tensors(), type, p.initTensors(w.tensors().size()), frames);
    }
    default:
      return Internal(StrCat("a ", MessageTypeName(type), " is no host request"));
  }
}

Status ReadHostRequest(schema::HostRequest::Reader b, Received& r) {
  Message& m = *r.m;
  switch (b.which()) {
    case schema::HostRequest::STORE_SET: {
      m.type = MessageType::kStoreSet;
      const auto p = b.getStoreSet();
      m.text = TextOf(p.getValue());
      return ReadNames(p.getKeys(), "key", r, &m.names);
    }
    case schema::HostRequest::STORE_GET:
      m.type = MessageType::kStoreGet;
      return ReadNames(b.getStoreGet().getKeys(), "key", r, &m.names);
    case schema::HostRequest::COLLECTIVE: {
      m.type = MessageType::kCollective;
      const auto p = b.getCollective();
      m.text = TextOf(p.getOp());
      m.value = p.getN();
      m.step = p.getCall();
      m.root = p.getRoot();
      return ReadTensors(p.getTensors(), r);
    }
  }
  return UnknownType("host request", b.which(), r, "store set", schema::HostRequest::COLLECTIVE,
                     "collective");
}

}  // namespace codec
}  // namespace wire
}  // namespace pstrain
