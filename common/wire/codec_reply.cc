// Replies, ok or error, of every protocol: one struct holding what servers, hubs and stores
// answer with; only an error carries a status code.
#include "common/wire/codec_body.h"

namespace pstrain {
namespace wire {
namespace codec {
namespace {

constexpr uint16_t kLastStatusCode = static_cast<uint16_t>(StatusCode::kUninitialized);

}  // namespace

Status WriteReply(Written& w, schema::Reply::Builder b, std::vector<Frame>* frames) {
  const MessageType type = w.type();
  b.setStep(w.step());
  b.setValue(w.value());
  b.setText(AsText(w.text()));
  b.setSequence(w.sequence());
  auto steps = b.initSteps(w.steps().size());
  for (size_t i = 0; i < w.steps().size(); ++i) steps.set(i, w.steps()[i]);
  WriteUses(w.uses(), b.initUses(w.uses().size()));
  WriteChains(w.chains(), b.initChains(w.chains().size()));
  WriteMapProofs(w.map_proofs(), b.initMapProofs(w.map_proofs().size()));
  WriteChains(w.caught_up(), b.initCaughtUp(w.caught_up().size()));
  if (type == MessageType::kError) b.setErrorCode(static_cast<uint16_t>(w.error_code()));
  return WriteTensors(w.tensors(), type, b.initTensors(w.tensors().size()), frames);
}

Status ReadReply(schema::Reply::Reader b, MessageType type, Received& r) {
  Message& m = *r.m;
  m.type = type;
  if (type == MessageType::kError) {
    const uint16_t code = b.getErrorCode();
    if (code > kLastStatusCode) {
      return InvalidArgument(StrCat("unknown error code ", code, " in an error from ", r.sender,
                                    "; known codes are 0 to ", kLastStatusCode));
    }
    m.error_code = static_cast<StatusCode>(code);
  }
  m.step = b.getStep();
  m.value = b.getValue();
  m.text = TextOf(b.getText());
  m.sequence = b.getSequence();
  for (int64_t step : b.getSteps()) m.steps.push_back(step);
  RETURN_IF_ERROR(ReadUses(b.getUses(), r));
  RETURN_IF_ERROR(ReadChains(b.getChains(), "chains", r, &m.chains));
  RETURN_IF_ERROR(ReadMapProofs(b.getMapProofs(), r));
  RETURN_IF_ERROR(ReadChains(b.getCaughtUp(), "caught-up chains", r, &m.caught_up));
  return ReadTensors(b.getTensors(), r);
}

}  // namespace codec
}  // namespace wire
}  // namespace pstrain
