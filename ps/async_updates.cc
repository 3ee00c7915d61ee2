// --update_mode=async: every push is applied on arrival (ps/update_policy.h).
#include "ps/async_updates.h"

#include <utility>

namespace pstrain {
namespace ps {

void AsyncUpdates::Take(const std::string& peer, const wire::Message& request,
                        const PushContents& push, std::vector<Outgoing>* out) {
  NamedTensors prepared;
  Status s = shard_->Apply(request.step, push.gradients, VariableStore::Checked::kYes, &prepared);
  if (!s.ok()) {
    // The assigns were made: a backup makes them too.
    if (!push.assigns.empty()) shard_->Commit({request.step, {}, push.assigns, {}}, {}, {}, out);
    out->push_back({peer, shard_->Refusal(request, s.message())});
    return;
  }
  // A step pushed in parts (PsClient's overlapped push) counts once, with its last part.
  if (request.value == 0) {
    shard_->NoteStaleness(request.step);
    shard_->CountUpdate();
  }
  const wire::Message reply = shard_->Ok(request);
  shard_->RememberPush(request, reply, /*in_window=*/false);
  Update update{
      request.step, std::move(prepared), push.assigns, {shard_->RetryEntry(request, reply)}};
  shard_->Commit(std::move(update), {{peer, reply}}, {shard_->Who(request)}, out);
}

}  // namespace ps
}  // namespace pstrain
