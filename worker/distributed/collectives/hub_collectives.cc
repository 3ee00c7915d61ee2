#include "worker/distributed/collectives/hub_collectives.h"

#include <cstring>

namespace pstrain {

using wire::Message;
using wire::MessageType;

namespace {
int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

Result<std::unique_ptr<HubCollectives>> HubCollectives::Connect(
    const std::string& hub_endpoint, const HubCollectivesOptions& options,
    const wire::Security& security) {
  if (options.rank < 0 || options.rank >= options.size) {
    return InvalidArgument("rank must be in [0, " + std::to_string(options.size) + "), got " +
                           std::to_string(options.rank));
  }
  auto c = std::unique_ptr<HubCollectives>(new HubCollectives());
  c->options_ = options;
  c->endpoint_ = hub_endpoint;
  ASSIGN_OR_RETURN(c->connection_, wire::Connection::Connect(hub_endpoint, {}, security));
  ASSIGN_OR_RETURN(c->heartbeat_connection_, wire::Connection::Connect(hub_endpoint, {}, security));
  c->last_answer_ms_ = NowMs();
  c->heartbeat_ = std::thread([p = c.get()] { p->Heartbeat(); });
  return c;
}

HubCollectives::~HubCollectives() {
  stop_.Stop();
  if (heartbeat_.joinable()) heartbeat_.join();
}

void HubCollectives::Heartbeat() {
  Message beat;
  beat.type = MessageType::kHeartbeat;
  beat.role = "rank";
  beat.task_index = options_.rank;
  beat.incarnation = wire::ProcessIncarnation();
  while (!stop_.stopped()) {
    if (heartbeat_connection_->Call(beat, options_.heartbeat_interval * 2).ok()) {
      last_answer_ms_ = NowMs();
    }
    stop_.WaitFor(options_.heartbeat_interval);
  }
}

int64_t HubCollectives::HubSilenceMs() const { return NowMs() - last_answer_ms_; }

Status HubCollectives::Call(const CollectiveCall& call, const float* in, int64_t in_elements,
                            float* out, int64_t out_elements) {
  Message m;
  m.type = MessageType::kCollective;
  m.role = "rank";
  m.task_index = options_.rank;
  m.text = CollectiveOpName(call.op);
  m.value = call.n;
  m.step = calls_++;
  m.root = call.root;
  m.incarnation = wire::ProcessIncarnation();
  if (call.has_data) {
    // Copied into the message: after a timeout ZeroMQ may still hold (and later send) a frame,
    // which must not point at the caller's memory.
    Tensor owned = Tensor::Uninitialized(Shape{std::max<int64_t>(in_elements, 0)});
    if (owned.size() > 0) std::memcpy(owned.data(), in, owned.bytes());
    m.tensors.push_back({"in", owned});
  }
  const std::string what = std::string(CollectiveOpName(call.op)) + " #" + std::to_string(m.step) +
                           " on rank " + std::to_string(options_.rank);
  const uint64_t id = next_request_id_++;
  m.request_id = id;
  const std::string hub =
      "the host's hub at " + endpoint_ + " (served by the host's leader, " + "local rank 0)";
  Status sent = connection_->Send(m);
  if (!sent.ok()) return sent.WithContext(what + ": sending to " + hub);
  // Waits in slices, so that a hub that stopped answering heartbeats (its process died) fails
  // the call within seconds rather than after the whole timeout.
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  Result<Message> reply = Unavailable("unset");
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return Unavailable(what + ": no answer from " + hub + " within " +
                         std::to_string(options_.timeout.count() / 1000) + " s");
    }
    reply = connection_->Receive(std::min(left, std::chrono::milliseconds(500)));
    if (reply.ok() && reply->request_id == id) break;
    if (reply.ok()) continue;  // a late reply to an earlier call that gave up
    if (reply.status().code() != StatusCode::kUnavailable) {
      return reply.status().WithContext(what + ": waiting for " + hub);
    }
    if (HubSilenceMs() > options_.hub_silence_limit.count()) {
      return Unavailable(what + ": " + hub + " has not answered heartbeats for " +
                         std::to_string(HubSilenceMs() / 1000) +
                         " s; its process may have died (see the leader's log)");
    }
  }
  Status verdict = wire::StatusOfReply(*reply);
  if (!verdict.ok()) return verdict;  // the hub's verdict, the same on every rank
  const int64_t got = reply->tensors.size() == 1 ? reply->tensors[0].tensor.size() : -1;
  if (got != out_elements) {
    return Internal(what + ": the hub replied with " + std::to_string(got) +
                    " elements, expected " + std::to_string(out_elements));
  }
  if (got > 0) std::memcpy(out, reply->tensors[0].tensor.data(), got * sizeof(float));
  return Status::OK();
}

Status HubCollectives::AllReduceAverage(float* data, int64_t n) {
  const bool has_data = data != nullptr || n == 0;
  return Call({CollectiveOp::kAllReduce, n, 0, has_data}, data, n, data, std::max<int64_t>(n, 0));
}

Status HubCollectives::Broadcast(float* data, int64_t n, int root) {
  const bool has_data = data != nullptr || n == 0;
  const bool receives = rank() != root && n > 0;
  return Call({CollectiveOp::kBroadcast, n, root, has_data}, data, rank() == root ? n : 0, data,
              receives ? n : 0);
}

Status HubCollectives::ReduceScatterAverage(const float* in, float* out_shard, int64_t n) {
  const int64_t shard = n >= 0 ? ShardOf(n, size(), rank()).size() : 0;
  const bool has_data = (in != nullptr || n == 0) && (out_shard != nullptr || shard == 0);
  return Call({CollectiveOp::kReduceScatter, n, 0, has_data}, in, n, out_shard, shard);
}

Status HubCollectives::AllGather(const float* shard_in, float* out, int64_t n) {
  const int64_t shard = n >= 0 ? ShardOf(n, size(), rank()).size() : 0;
  const bool has_data = (shard_in != nullptr || shard == 0) && (out != nullptr || n == 0);
  return Call({CollectiveOp::kAllGather, n, 0, has_data}, shard_in, shard, out,
              std::max<int64_t>(n, 0));
}

}  // namespace pstrain
