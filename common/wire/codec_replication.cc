// The replication protocol (between the servers of a shard's chain, docs/replication.md section
// 3): a record to the successor, a snapshot to a joining task.
#include "common/wire/codec_body.h"

namespace pstrain {
namespace wire {
namespace codec {

Status WriteReplicationRequest(Written& w, schema::ReplicationRequest::Builder b,
                               std::vector<Frame>* frames) {
  const MessageType type = w.type();
  switch (type) {
    case MessageType::kReplicate: {
      auto p = b.initReplicate();
      p.setRecord(w.sequence());
      p.setAppliedAt(w.step());
      p.setStepAfter(w.value());
      if (!w.link().empty()) p.setLink(AsData(w.link()));
      p.setMadeEpoch(w.made_epoch());
      WriteMapProofs(w.record_tags(), p.initTags(w.record_tags().size()));
      if (!w.state_digest().empty()) p.setStateDigest(AsData(w.state_digest()));
      WriteUses(w.uses(), p.initUses(w.uses().size()));
      RETURN_IF_ERROR(WritePushes(w.pushes(), type, p.initPushes(w.pushes().size())));
      RETURN_IF_ERROR(WriteNames(w.assigns(), "assign", type, p.initAssigns(w.assigns().size())));
      return WriteTensors(w.tensors(), type, p.initTensors(w.tensors().size()), frames);
    }
    case MessageType::kReplicaCopy: {
      auto p = b.initReplicaCopy();
      p.setRecord(w.sequence());
      p.setGlobalStep(w.value());
      p.setFingerprint(AsText(w.text()));
      if (!w.link().empty()) p.setLink(AsData(w.link()));
      WriteUses(w.uses(), p.initUses(w.uses().size()));
      RETURN_IF_ERROR(WritePushes(w.pushes(), type, p.initPushes(w.pushes().size())));
      return WriteTensors(w.tensors(), type, p.initTensors(w.tensors().size()), frames);
    }
    default:
      return Internal(StrCat("a ", MessageTypeName(type), " is no replication request"));
  }
}

Status ReadReplicationRequest(schema::ReplicationRequest::Reader b, Received& r) {
  Message& m = *r.m;
  switch (b.which()) {
    case schema::ReplicationRequest::REPLICATE: {
      m.type = MessageType::kReplicate;
      const auto p = b.getReplicate();
      m.sequence = p.getRecord();
      m.step = p.getAppliedAt();
      m.value = p.getStepAfter();
      m.link = BytesOf(p.getLink());
      m.made_epoch = p.getMadeEpoch();
      RETURN_IF_ERROR(ReadKeyTags(p.getTags(), "record tags", r, &m.record_tags));
      m.state_digest = BytesOf(p.getStateDigest());
      if (!m.state_digest.empty() && m.state_digest.size() != kStateDigestBytes) {
        return InvalidArgument(StrCat("the replicate from ", r.sender,
                                      " carries a state digest of ", m.state_digest.size(),
                                      " bytes (expected ", kStateDigestBytes, ", or none)"));
      }
      RETURN_IF_ERROR(ReadNames(p.getAssigns(), "assign", r, &m.assigns));
      RETURN_IF_ERROR(ReadPushes(p.getPushes(), r));
      RETURN_IF_ERROR(ReadUses(p.getUses(), r));
      RETURN_IF_ERROR(ReadTensors(p.getTensors(), r));
      return CheckAssigns(m);
    }
    case schema::ReplicationRequest::REPLICA_COPY: {
      m.type = MessageType::kReplicaCopy;
      const auto p = b.getReplicaCopy();
      m.sequence = p.getRecord();
      m.value = p.getGlobalStep();
      m.text = TextOf(p.getFingerprint());
      m.link = BytesOf(p.getLink());
      RETURN_IF_ERROR(ReadPushes(p.getPushes(), r));
      RETURN_IF_ERROR(ReadUses(p.getUses(), r));
      return ReadTensors(p.getTensors(), r);
    }
  }
  return UnknownType("replication request", b.which(), r, "replicate",
                     schema::ReplicationRequest::REPLICA_COPY, "replica copy");
}

}  // namespace codec
}  // namespace wire
}  // namespace pstrain
