#include "worker/distributed/collectives/host_hub.h"

#include <glog/logging.h>

#include <cstring>
#include <utility>

namespace pstrain {

using std::chrono::milliseconds;
using wire::Message;
using wire::MessageType;

Result<std::unique_ptr<HostHub>> HostHub::Start(const std::string& endpoint,
                                                const HostHubOptions& options,
                                                const wire::Security& security,
                                                const std::string& same_host) {
  if (options.size < 1) {
    return InvalidArgument("a host hub needs a group of at least one rank, got " +
                           std::to_string(options.size));
  }
  auto hub = std::unique_ptr<HostHub>(new HostHub());
  hub->state_ = std::make_unique<HubState>(options);
  ASSIGN_OR_RETURN(hub->socket_, wire::ServerSocket::Bind(endpoint, {}, security));
  if (!same_host.empty()) RETURN_IF_ERROR(hub->socket_->ListenAlsoOn(same_host));
  hub->thread_ = std::thread([h = hub.get()] { h->Serve(); });
  return hub;
}

HostHub::~HostHub() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void HostHub::Serve() {
  while (!stop_) {
    Result<wire::Incoming> in = socket_->Receive(milliseconds(100));
    std::vector<HubState::Outgoing> replies = state_->Expire(HubState::Clock::now());
    if (in.ok()) {
      std::vector<HubState::Outgoing> more;
      if (in->message.ok()) {
        more = state_->Handle(in->peer, std::move(in->message).value(), HubState::Clock::now(),
                              in->identity);
      } else {
        Message request;
        request.request_id = in->request_id;
        more.push_back({in->peer, wire::ErrorReply(request, in->message.status())});
      }
      for (auto& r : more) replies.push_back(std::move(r));
    }
    for (const HubState::Outgoing& r : replies) {
      Status sent = socket_->Reply(r.peer, r.message);
      if (!sent.ok()) VLOG(1) << "host hub reply: " << sent.ToString();
    }
  }
}

}  // namespace pstrain
