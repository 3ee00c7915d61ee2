#include "worker/collectives/hub_collectives.h"

#include <cstring>

namespace pstrain {

using wire::Message;
using wire::MessageType;

Result<std::unique_ptr<HubCollectives>> HubCollectives::Connect(
    const std::string& hub_endpoint, const HubCollectivesOptions& options,
    const wire::Security& security) {
  if (options.rank < 0 || options.rank >= options.size) {
    return InvalidArgument("rank must be in [0, " + std::to_string(options.size) + "), got " +
                           std::to_string(options.rank));
  }
  auto c = std::unique_ptr<HubCollectives>(new HubCollectives());
  c->options_ = options;
  ASSIGN_OR_RETURN(c->connection_, wire::Connection::Connect(hub_endpoint, {}, security));
  return c;
}

Status HubCollectives::Call(const CollectiveCall& call, const float* in, int64_t in_elements,
                            float* out, int64_t out_elements) {
  Message m;
  m.type = MessageType::kCollective;
  m.role = "rank";
  m.task_index = options_.rank;
  m.text = CollectiveOpName(call.op);
  m.value = call.n;
  m.step = calls_++;
  m.sequence = static_cast<uint64_t>(call.root);
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
  Result<Message> reply = connection_->Call(std::move(m), options_.timeout);
  if (!reply.ok()) {
    if (reply.status().code() == StatusCode::kUnavailable) {
      return Unavailable(
          what + ": no answer from the host's hub at " + connection_->endpoint() +
          " (served by the host's leader, local rank 0): " + reply.status().message());
    }
    return reply.status();  // the hub's verdict, the same on every rank
  }
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
