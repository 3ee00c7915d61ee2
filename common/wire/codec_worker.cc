// The worker protocol (workers, evaluators and the chief to a parameter server): each request
// type's struct in pstrain.capnp, written from and read into the flat Message.
#include "common/wire/codec_body.h"

namespace pstrain {
namespace wire {
namespace codec {

Status WriteWorkerRequest(Written& w, schema::WorkerRequest::Builder b,
                          std::vector<Frame>* frames) {
  const MessageType type = w.type();
  switch (type) {
    case MessageType::kRegister: {
      auto r = b.initRegister();
      r.setStep(w.step());
      return WriteTensors(w.tensors(), type, r.initTensors(w.tensors().size()), frames);
    }
    case MessageType::kPull: {
      auto p = b.initPull();
      p.setDtype(SchemaDType(w.pull_dtype()));
      return WriteNames(w.names(), "name", type, p.initNames(w.names().size()));
    }
    case MessageType::kPush: {
      auto p = b.initPush();
      p.setStep(w.step());
      p.setSequence(w.sequence());
      p.setParts(w.value());
      WriteUses(w.uses(), p.initUses(w.uses().size()));
      RETURN_IF_ERROR(WriteNames(w.assigns(), "assign", type, p.initAssigns(w.assigns().size())));
      return WriteTensors(w.tensors(), type, p.initTensors(w.tensors().size()), frames);
    }
    case MessageType::kBarrier: {
      auto p = b.initBarrier();
      p.setName(AsText(w.text()));
      p.setParticipants(w.value());
      return Status::OK();
    }
    case MessageType::kHeartbeat:
      b.initHeartbeat().setText(AsText(w.text()));
      return Status::OK();
    case MessageType::kCheckpoint: {
      auto p = b.initCheckpoint();
      p.setStep(w.step());
      p.setTrainDir(AsText(w.text()));
      return Status::OK();
    }
    case MessageType::kShutdown:
      b.initShutdown();
      return Status::OK();
    case MessageType::kRestore:
      b.initRestore().setStep(w.step());
      return Status::OK();
    case MessageType::kShardMap: {
      auto p = b.initShardMap();
      WriteChains(w.chains(), p.initChains(w.chains().size()));
      WriteMapProofs(w.map_proofs(), p.initMapProofs(w.map_proofs().size()));
      return Status::OK();
    }
    case MessageType::kDataLease:
      b.initDataLease().setEpoch(w.value());
      return Status::OK();
    case MessageType::kRowPull: {
      auto p = b.initRowPull();
      p.setTable(AsText(w.text()));
      p.setReadOnly(w.value() != 0);
      return WriteRows(w.text(), w.ids(), type, p.initIds(), frames);
    }
    case MessageType::kRowPush: {
      auto p = b.initRowPush();
      p.setTable(AsText(w.text()));
      p.setStep(w.step());
      p.setSequence(w.sequence());
      RETURN_IF_ERROR(WriteRows(w.text(), w.ids(), type, p.initIds(), frames));
      RETURN_IF_ERROR(CheckRowPush(w.text(), w.ids().size(), w.tensors(), "this process"));
      return WriteTensors(w.tensors(), type, p.initTensors(w.tensors().size()), frames);
    }
    default:
      return Internal(StrCat("a ", MessageTypeName(type), " is no worker request"));
  }
}

Status ReadWorkerRequest(schema::WorkerRequest::Reader b, Received& r) {
  Message& m = *r.m;
  switch (b.which()) {
    case schema::WorkerRequest::REGISTER: {
      m.type = MessageType::kRegister;
      const auto p = b.getRegister();
      m.step = p.getStep();
      return ReadTensors(p.getTensors(), r);
    }
    case schema::WorkerRequest::PULL: {
      m.type = MessageType::kPull;
      const auto p = b.getPull();
      ASSIGN_OR_RETURN(m.pull_dtype,
                       DTypeOf(p.getDtype(), StrCat("the pull's reply dtype from ", r.sender)));
      return ReadNames(p.getNames(), "name", r, &m.names);
    }
    case schema::WorkerRequest::PUSH: {
      m.type = MessageType::kPush;
      const auto p = b.getPush();
      m.step = p.getStep();
      m.sequence = p.getSequence();
      m.value = p.getParts();
      RETURN_IF_ERROR(ReadNames(p.getAssigns(), "assign", r, &m.assigns));
      RETURN_IF_ERROR(ReadUses(p.getUses(), r));
      RETURN_IF_ERROR(ReadTensors(p.getTensors(), r));
      return CheckAssigns(m);
    }
    case schema::WorkerRequest::BARRIER: {
      m.type = MessageType::kBarrier;
      const auto p = b.getBarrier();
      m.text = TextOf(p.getName());
      m.value = p.getParticipants();
      return Status::OK();
    }
    case schema::WorkerRequest::HEARTBEAT:
      m.type = MessageType::kHeartbeat;
      m.text = TextOf(b.getHeartbeat().getText());
      return Status::OK();
    case schema::WorkerRequest::CHECKPOINT: {
      m.type = MessageType::kCheckpoint;
      const auto p = b.getCheckpoint();
      m.step = p.getStep();
      m.text = TextOf(p.getTrainDir());
      return Status::OK();
    }
    case schema::WorkerRequest::SHUTDOWN:
      m.type = MessageType::kShutdown;
      return Status::OK();
    case schema::WorkerRequest::RESTORE:
      m.type = MessageType::kRestore;
      m.step = b.getRestore().getStep();
      return Status::OK();
    case schema::WorkerRequest::SHARD_MAP: {
      m.type = MessageType::kShardMap;
      const auto p = b.getShardMap();
      RETURN_IF_ERROR(ReadChains(p.getChains(), "chains", r, &m.chains));
      return ReadMapProofs(p.getMapProofs(), r);
    }
    case schema::WorkerRequest::DATA_LEASE:
      m.type = MessageType::kDataLease;
      m.value = b.getDataLease().getEpoch();
      return Status::OK();
    case schema::WorkerRequest::ROW_PULL: {
      m.type = MessageType::kRowPull;
      const auto p = b.getRowPull();
      m.value = p.getReadOnly() ? 1 : 0;
      return ReadRows(p.getTable(), p.getIds(), r);
    }
    case schema::WorkerRequest::ROW_PUSH: {
      m.type = MessageType::kRowPush;
      const auto p = b.getRowPush();
      m.step = p.getStep();
      m.sequence = p.getSequence();
      RETURN_IF_ERROR(ReadRows(p.getTable(), p.getIds(), r));
      RETURN_IF_ERROR(ReadTensors(p.getTensors(), r));
      return CheckRowPush(m.text, m.ids.size(), m.tensors, r.sender);
    }
  }
  return UnknownType("worker request", b.which(), r, "register", schema::WorkerRequest::ROW_PUSH,
                     "row push");
}

}  // namespace codec
}  // namespace wire
}  // namespace pstrain
