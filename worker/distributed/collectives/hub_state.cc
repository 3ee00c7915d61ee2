#include "worker/distributed/collectives/hub_state.h"

#include <glog/logging.h>

#include <cstring>
#include <utility>

namespace pstrain {

using std::chrono::milliseconds;
using wire::Message;
using wire::MessageType;

namespace {

Result<CollectiveOp> ParseOp(const std::string& name) {
  for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kBroadcast,
                          CollectiveOp::kReduceScatter, CollectiveOp::kAllGather}) {
    if (name == CollectiveOpName(op)) return op;
  }
  return InvalidArgument("unknown collective '" + name +
                         "'; expected AllReduceAverage, Broadcast, ReduceScatterAverage or "
                         "AllGather");
}

// How many elements rank `rank` must send for `call` in a group of `size`.
int64_t InputElements(const CollectiveCall& call, int size, int rank) {
  switch (call.op) {
    case CollectiveOp::kAllReduce:
    case CollectiveOp::kReduceScatter:
      return call.n;
    case CollectiveOp::kBroadcast:
      return rank == call.root ? call.n : 0;
    case CollectiveOp::kAllGather:
      return ShardOf(call.n, size, rank).size();
  }
  return 0;
}

Tensor Vector(int64_t n) { return Tensor::Uninitialized(Shape{n}); }

}  // namespace

HubState::HubState(const HostHubOptions& options) : options_(options), store_(table_, /*rank=*/0) {
  CHECK_GE(options.size, 1) << "a host hub needs a group of at least one rank";
  incarnations_.assign(options.size, 0);
  last_heard_.assign(options.size, Clock::time_point{});
}

std::vector<HubState::Outgoing> HubState::Handle(const std::string& peer, Message request,
                                                 Clock::time_point now,
                                                 const std::string& identity) {
  out_.clear();
  const int rank = request.task_index;
  if (!identity.empty() && !options_.rank_keys.empty() &&
      (rank < 0 || rank >= static_cast<int>(options_.rank_keys.size()) ||
       options_.rank_keys[rank] != identity)) {
    ReplyTo(peer, wire::ErrorReply(
                      request, PermissionDenied("the request names rank " + std::to_string(rank) +
                                                " but its key is " + identity + "'s")));
  } else if (request.type == MessageType::kCollective) {
    Collect(peer, std::move(request), now);
  } else if (request.type == MessageType::kHeartbeat) {
    Heartbeat(peer, request, now);
  } else {
    ReplyTo(peer, AnswerStore(request));
  }
  return std::move(out_);
}

void HubState::ReplyTo(const std::string& peer, const Message& reply) {
  out_.push_back({peer, reply});
}

Message HubState::AnswerStore(const Message& m) {
  if ((m.type != MessageType::kStoreSet && m.type != MessageType::kStoreGet) ||
      m.names.size() != 1) {
    return wire::ErrorReply(m, InvalidArgument(std::string("the host hub expects a collective, "
                                                           "or a store set or get naming one "
                                                           "key, got a ") +
                                               wire::MessageTypeName(m.type)));
  }
  Message reply;
  reply.type = MessageType::kOk;
  reply.request_id = m.request_id;
  if (m.type == MessageType::kStoreSet) {
    size_t keys = 0;
    {
      std::lock_guard<std::mutex> lock(table_->mutex);
      keys = table_->values.count(m.names[0]) ? 0 : table_->values.size();
    }
    if (keys >= kMaxStoreKeys) {
      return wire::ErrorReply(m, ResourceExhausted("the host hub's store holds " +
                                                   std::to_string(keys) + " keys, its limit"));
    }
    Status s = store_.Set(m.names[0], m.text);
    if (!s.ok()) return wire::ErrorReply(m, s);
    return reply;
  }
  Result<std::string> value = store_.Get(m.names[0], milliseconds(0));
  reply.value = value.ok() ? 1 : 0;
  if (value.ok()) reply.text = value.value();
  return reply;
}

void HubState::NoteIncarnation(int rank, uint64_t incarnation) {
  if (incarnations_[rank] == 0) incarnations_[rank] = incarnation;
  if (broken_.ok() && incarnation != incarnations_[rank]) {
    broken_ = FailedPrecondition(
        "rank " + std::to_string(rank) +
        " of the host's workers restarted (a new process); the host's workers sync as one "
        "group and must all start again");
    LOG(ERROR) << "host hub: " << broken_.message();
    for (auto& [n, p] : pending_) FailAll(p, broken_);
    pending_.clear();
  }
}

void HubState::Heartbeat(const std::string& peer, const Message& m, Clock::time_point now) {
  const int rank = m.task_index;
  if (rank < 0 || rank >= options_.size) {
    return ReplyTo(
        peer, wire::ErrorReply(m, InvalidArgument("a heartbeat from rank " + std::to_string(rank) +
                                                  ", outside the hub's group of " +
                                                  std::to_string(options_.size) + " rank(s)")));
  }
  last_heard_[rank] = now;
  NoteIncarnation(rank, m.incarnation);
  Message ok;
  ok.type = MessageType::kOk;
  ok.request_id = m.request_id;
  ReplyTo(peer, ok);
}

void HubState::Collect(const std::string& peer, Message m, Clock::time_point now) {
  const int rank = m.task_index;
  const int64_t number = m.step;
  const std::string who = "rank " + std::to_string(rank);
  if (rank < 0 || rank >= options_.size) {
    return ReplyTo(
        peer, wire::ErrorReply(m, InvalidArgument(who + " is outside the hub's group of " +
                                                  std::to_string(options_.size) + " rank(s)")));
  }
  Result<CollectiveOp> op = ParseOp(m.text);
  if (!op.ok()) return ReplyTo(peer, wire::ErrorReply(m, op.status().WithContext(who)));
  if (m.tensors.size() > 1) {
    return ReplyTo(peer, wire::ErrorReply(
                             m, InvalidArgument(who + " sent " + std::to_string(m.tensors.size()) +
                                                " tensors; a collective takes one")));
  }
  NoteIncarnation(rank, m.incarnation);
  if (!broken_.ok()) return ReplyTo(peer, wire::ErrorReply(m, broken_));
  if (!pending_.count(number) && pending_.size() >= kMaxPendingCalls) {
    return ReplyTo(
        peer,
        wire::ErrorReply(m, ResourceExhausted(who + " began collective #" + std::to_string(number) +
                                              " while " + std::to_string(pending_.size()) +
                                              " others wait for ranks, the hub's limit")));
  }
  Pending& p = pending_[number];
  if (p.ranks.empty()) {
    p.ranks.resize(options_.size);
    p.first = now;
  }
  if (p.ranks[rank] != nullptr) {
    return ReplyTo(peer, wire::ErrorReply(m, InvalidArgument(who + " joined collective #" +
                                                             std::to_string(number) + " twice")));
  }
  auto c = std::make_unique<Contribution>();
  c->peer = peer;
  c->call = {*op, m.value, m.root, m.tensors.size() == 1};
  c->request = std::move(m);
  p.ranks[rank] = std::move(c);
  if (++p.arrived == options_.size) {
    Complete(number, p);
    pending_.erase(number);
  }
}

void HubState::FailAll(Pending& p, const Status& status) {
  for (const auto& c : p.ranks) {
    if (c) ReplyTo(c->peer, wire::ErrorReply(c->request, status));
  }
}

void HubState::Complete(int64_t number, Pending& p) {
  const int size = options_.size;
  std::vector<CollectiveCall> calls;
  for (const auto& c : p.ranks) calls.push_back(c->call);
  Status checked = CheckCollectiveCalls(calls);
  const CollectiveCall call = calls[0];
  for (int r = 0; r < size && checked.ok(); ++r) {
    const Contribution& c = *p.ranks[r];
    const int64_t want = InputElements(call, size, r);
    const int64_t got = c.call.has_data ? c.request.tensors[0].tensor.size() : 0;
    if (got != want) {
      checked = InvalidArgument(std::string(CollectiveOpName(call.op)) + " on rank " +
                                std::to_string(r) + ": sent " + std::to_string(got) +
                                " elements, expected " + std::to_string(want));
    }
  }
  if (!checked.ok()) return FailAll(p, checked);
  auto input = [&](int r) { return p.ranks[r]->request.tensors[0].tensor.data(); };
  auto average = [&](const ShardRange& s, float* out) {
    const float count = static_cast<float>(size);
    for (int64_t i = s.begin; i < s.end; ++i) {
      float sum = input(0)[i];
      for (int r = 1; r < size; ++r) sum += input(r)[i];
      out[i - s.begin] = sum / count;
    }
  };
  std::vector<Tensor> outputs(size);
  switch (call.op) {
    case CollectiveOp::kAllReduce: {
      Tensor all = Vector(call.n);
      average({0, call.n}, all.data());
      for (Tensor& t : outputs) t = all;
      break;
    }
    case CollectiveOp::kBroadcast:
      for (int r = 0; r < size; ++r) {
        outputs[r] = r == call.root || call.n == 0 ? Vector(0)
                                                   : p.ranks[call.root]->request.tensors[0].tensor;
      }
      break;
    case CollectiveOp::kReduceScatter:
      for (int r = 0; r < size; ++r) {
        const ShardRange s = ShardOf(call.n, size, r);
        outputs[r] = Vector(s.size());
        average(s, outputs[r].data());
      }
      break;
    case CollectiveOp::kAllGather: {
      Tensor all = Vector(call.n);
      for (int r = 0; r < size; ++r) {
        const ShardRange s = ShardOf(call.n, size, r);
        if (s.size() > 0) std::memcpy(all.data() + s.begin, input(r), s.size() * sizeof(float));
      }
      for (Tensor& t : outputs) t = all;
      break;
    }
  }
  for (int r = 0; r < size; ++r) {
    Message reply;
    reply.type = MessageType::kOk;
    reply.request_id = p.ranks[r]->request.request_id;
    reply.step = number;
    reply.tensors.push_back({"out", outputs[r]});
    ReplyTo(p.ranks[r]->peer, reply);
  }
}

std::vector<HubState::Outgoing> HubState::Expire(Clock::time_point now) {
  out_.clear();
  for (auto it = pending_.begin(); it != pending_.end();) {
    // A missing rank that heartbeated before and has gone silent is dead: fail at once.
    std::string silent;
    for (int r = 0; r < options_.size; ++r) {
      if (it->second.ranks[r] != nullptr || last_heard_[r] == Clock::time_point{}) continue;
      if (now - last_heard_[r] > options_.rank_silence_limit) {
        silent += (silent.empty() ? "" : ", ") + std::to_string(r);
      }
    }
    if (!silent.empty()) {
      const Status dead = Unavailable(
          "collective #" + std::to_string(it->first) + ": rank(s) " + silent +
          " stopped heartbeating more than " + std::to_string(options_.rank_silence_limit.count()) +
          " ms ago without joining; their process may have died (see their logs)");
      LOG(ERROR) << "host hub: " << dead.message();
      FailAll(it->second, dead);
      it = pending_.erase(it);
      continue;
    }
    if (now - it->second.first < options_.timeout) {
      ++it;
      continue;
    }
    std::string missing;
    for (int r = 0; r < options_.size; ++r) {
      if (it->second.ranks[r] == nullptr)
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    const Status late =
        Unavailable("collective #" + std::to_string(it->first) + ": rank(s) " + missing +
                    " did not join within " + std::to_string(options_.timeout.count()) +
                    " ms (see their logs; did one die?)");
    LOG(ERROR) << "host hub: " << late.message();
    FailAll(it->second, late);
    it = pending_.erase(it);
  }
  return std::move(out_);
}

}  // namespace pstrain
