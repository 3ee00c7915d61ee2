#include "worker/ps_client.h"

#include <cstring>
#include <map>
#include <thread>

namespace pstrain {
namespace worker {

using std::chrono::milliseconds;
using wire::Message;
using wire::MessageType;

namespace {
// Long enough for a sync step that waits on the slowest worker.
constexpr milliseconds kStepTimeout(300000);
constexpr milliseconds kShortTimeout(30000);

// Rows [begin, end) of `t` as a tensor sharing its buffer.
Tensor Rows(const Tensor& t, const ps::Partition& p) {
  if (p.row_begin == 0 && p.row_end == (t.shape().rank() ? t.dim(0) : 1)) return t;
  const int64_t row = t.size() / t.dim(0);
  Tensor keep = t;
  return Tensor::Wrap(p.shape, const_cast<float*>(t.data()) + p.row_begin * row, [keep] {});
}
}  // namespace

Result<std::unique_ptr<PsClient>> PsClient::Connect(const std::vector<std::string>& ps_hosts,
                                                    const std::string& role, int task_index,
                                                    const std::vector<Variable*>& variables,
                                                    int64_t partition_bytes) {
  auto c = std::unique_ptr<PsClient>(new PsClient());
  c->role_ = role;
  c->task_index_ = task_index;
  c->variables_ = variables;
  std::vector<ps::VariableSpec> specs;
  for (Variable* v : variables) specs.push_back({v->name, v->value.shape()});
  ASSIGN_OR_RETURN(c->placement_, ps::Placement::Compute(specs, static_cast<int>(ps_hosts.size()),
                                                         partition_bytes));
  for (const std::string& host : ps_hosts) {
    ASSIGN_OR_RETURN(auto conn, wire::Connection::Connect(wire::TcpEndpoint(host)));
    c->servers_.push_back(std::move(conn));
  }
  return c;
}

Message PsClient::Request(MessageType type) const {
  Message m;
  m.type = type;
  m.role = role_;
  m.task_index = task_index_;
  return m;
}

Result<std::vector<Message>> PsClient::Exchange(const std::vector<std::pair<int, Message>>& out,
                                                milliseconds timeout) {
  std::vector<uint64_t> ids;
  for (const auto& [server, message] : out) {
    Message m = message;
    m.request_id = next_id_++;
    ids.push_back(m.request_id);
    RETURN_IF_ERROR(servers_[server]->Send(m).WithContext("ps " + std::to_string(server)));
  }
  std::vector<Message> replies(out.size());
  std::vector<bool> have(out.size(), false);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (size_t i = 0; i < out.size(); ++i) {
    const int server = out[i].first;
    while (!have[i]) {
      auto left =
          std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        return Unavailable("no reply from ps " + std::to_string(server) + " (" +
                           servers_[server]->endpoint() + ") within " +
                           std::to_string(timeout.count()) + " ms");
      }
      ASSIGN_OR_RETURN(Message reply, servers_[server]->Receive(left));
      for (size_t k = 0; k < out.size(); ++k) {
        if (out[k].first == server && reply.request_id == ids[k] && !have[k]) {
          if (reply.type == MessageType::kError) return FailedPrecondition(reply.text);
          replies[k] = std::move(reply);
          have[k] = true;
          break;
        }
      }
    }
  }
  return replies;
}

Result<int> PsClient::Initialize(int64_t step) {
  std::vector<std::pair<int, Message>> out;
  for (size_t s = 0; s < servers_.size(); ++s) {
    Message m = Request(MessageType::kRegister);
    m.step = step;
    for (const ps::Partition& p : placement_.OnTask(static_cast<int>(s))) {
      for (Variable* v : variables_) {
        if (v->name == p.variable) m.tensors.push_back({p.key, Rows(v->value, p)});
      }
    }
    out.emplace_back(static_cast<int>(s), std::move(m));
  }
  ASSIGN_OR_RETURN(std::vector<Message> replies, Exchange(out, kShortTimeout));
  int kept = 0;
  for (const Message& r : replies) kept += r.text == "kept";
  return kept;
}

Status PsClient::WaitUntilInitialized(std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  milliseconds backoff(100);
  for (int attempt = 0;; ++attempt) {
    std::vector<std::pair<int, Message>> out;
    for (size_t s = 0; s < servers_.size(); ++s) {
      out.emplace_back(static_cast<int>(s), Request(MessageType::kRegister));
    }
    Result<std::vector<Message>> replies = Exchange(out, kShortTimeout);
    bool ready = replies.ok();
    if (ready) {
      for (const Message& r : replies.value()) ready = ready && r.value == 1;
    }
    if (ready) return Status::OK();
    if (std::chrono::steady_clock::now() > deadline) {
      return Unavailable("the parameter servers were not initialised within " +
                         std::to_string(timeout.count()) + " s (is the chief, worker 0, up?)");
    }
    if (attempt % 20 == 0) {
      LOG(INFO) << role_ << " " << task_index_ << ": waiting for the chief to initialise the "
                << "variables" << (replies.ok() ? "" : " (" + replies.status().message() + ")");
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, milliseconds(1000));
  }
}

void PsClient::CopyIn(const std::vector<Message>& replies) {
  std::map<std::string, const Tensor*> received;
  for (const Message& r : replies) {
    for (const auto& t : r.tensors) received[t.name] = &t.tensor;
  }
  for (const ps::Partition& p : placement_.partitions()) {
    auto it = received.find(p.key);
    if (it == received.end()) continue;
    for (Variable* v : variables_) {
      if (v->name != p.variable) continue;
      Tensor dst = Rows(v->value, p);
      std::memcpy(dst.data(), it->second->data(), dst.bytes());
    }
  }
}

Result<int64_t> PsClient::Pull() {
  std::vector<std::pair<int, Message>> out;
  for (size_t s = 0; s < servers_.size(); ++s) {
    out.emplace_back(static_cast<int>(s), Request(MessageType::kPull));
  }
  ASSIGN_OR_RETURN(std::vector<Message> replies, Exchange(out, kShortTimeout));
  CopyIn(replies);
  return replies[0].step;
}

Result<PushPullResult> PsClient::PushAndPull(int64_t step) {
  std::vector<std::pair<int, Message>> out;
  for (size_t s = 0; s < servers_.size(); ++s) {
    Message push = Request(MessageType::kPush);
    push.step = step;
    for (const ps::Partition& p : placement_.OnTask(static_cast<int>(s))) {
      for (Variable* v : variables_) {
        if (v->name != p.variable) continue;
        if (v->trainable) {
          push.tensors.push_back({p.key, Rows(v->grad, p)});
        } else {
          push.tensors.push_back({p.key, Rows(v->value, p)});
          push.names.push_back(p.key);  // a value to assign, not a gradient
        }
      }
    }
    out.emplace_back(static_cast<int>(s), std::move(push));
  }
  for (size_t s = 0; s < servers_.size(); ++s) {
    out.emplace_back(static_cast<int>(s), Request(MessageType::kPull));
  }
  ASSIGN_OR_RETURN(std::vector<Message> replies, Exchange(out, kStepTimeout));
  PushPullResult result;
  for (size_t s = 0; s < servers_.size(); ++s) result.dropped |= replies[s].value < 0;
  std::vector<Message> pulls(replies.begin() + servers_.size(), replies.end());
  CopyIn(pulls);
  result.global_step = pulls[0].step;
  return result;
}

Status PsClient::Barrier(const std::string& name, int participants) {
  Message m = Request(MessageType::kBarrier);
  m.text = name;
  m.value = participants;
  return Exchange({{0, m}}, milliseconds(3600 * 1000)).status();
}

Status PsClient::Checkpoint(int64_t step, const std::string& train_dir) {
  std::vector<std::pair<int, Message>> out;
  for (size_t s = 0; s < servers_.size(); ++s) {
    Message m = Request(MessageType::kCheckpoint);
    m.step = step;
    m.text = train_dir;
    out.emplace_back(static_cast<int>(s), m);
  }
  return Exchange(out, kShortTimeout).status();
}

Status PsClient::Shutdown() {
  std::vector<std::pair<int, Message>> out;
  for (size_t s = 0; s < servers_.size(); ++s) {
    out.emplace_back(static_cast<int>(s), Request(MessageType::kShutdown));
  }
  return Exchange(out, kShortTimeout).status();
}

}  // namespace worker
}  // namespace pstrain
