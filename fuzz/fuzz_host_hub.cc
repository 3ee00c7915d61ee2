// Fuzzes HubState, the host hub's answer to what the host's workers send it: collective calls
// from ranks in and out of the group, with right and wrong operations, counts, roots, call
// numbers, tensor sizes and process incarnations (restarts), store sets and gets, other message
// types, and time passing (collectives whose ranks never come). Every request goes through Encode
// and Decode first. Invariants: no crash; every request gets exactly one reply once the last
// stragglers expire; an OK collective reply carries one tensor of the size the caller expects.
#include <glog/logging.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/wire/codec.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_setup.h"
#include "fuzz/through_the_wire.h"
#include "worker/distributed/collectives/hub_state.h"

namespace pstrain {
namespace {

using fuzz::FuzzInput;
using fuzz::ThroughTheWire;
using wire::Message;
using wire::MessageType;

const std::vector<std::string> kOps = {"AllReduceAverage", "Broadcast", "ReduceScatterAverage",
                                       "AllGather",        "Reduce",    ""};

// What the caller of a collective expects back (-1: an op the hub does not know).
int64_t ExpectedOutput(const std::string& op, int64_t n, int root, int size, int rank) {
  if (op == "AllReduceAverage" || op == "AllGather") return n;
  if (op == "ReduceScatterAverage") return ShardOf(n, size, rank).size();
  if (op == "Broadcast") return rank == root ? 0 : n;
  return -1;
}

struct Sent {
  std::string op;
  int64_t n = 0;
  int root = 0;
  int rank = 0;
  int replies = 0;
};

Message Collective(FuzzInput& in, int size) {
  Message m;
  m.type = MessageType::kCollective;
  m.role = "rank";
  m.task_index = static_cast<int32_t>(in.Range(-1, size));
  m.text = in.Pick(kOps);
  m.value = in.Bool() ? in.Range(0, 9) : in.Raw<int64_t>();
  m.step = in.Range(0, 3);
  m.root = in.Bool() ? static_cast<int32_t>(in.Range(0, size)) : in.Raw<int32_t>();
  // A field of another type (a push's sequence) is refused, never read as the root.
  if (in.Byte() % 8 == 0) m.sequence = 1 + in.Range(0, 3);
  m.incarnation = 1 + in.Range(0, 1);  // a second incarnation is a restarted rank
  for (int64_t t = in.Range(0, 2); t > 0; --t) {
    Tensor x(Shape{in.Range(0, 9)});
    for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(in.Range(0, 7)) - 3.0f;
    m.tensors.push_back({"in", x});
  }
  return m;
}

Message Other(FuzzInput& in) {
  Message m;
  m.type = in.Pick<MessageType>({MessageType::kStoreSet, MessageType::kStoreGet, MessageType::kPull,
                                 MessageType::kHeartbeat});
  m.role = "rank";
  m.task_index = 0;
  for (int64_t k = in.Range(0, 2); k > 0; --k) m.names.push_back(in.Pick<std::string>({"a", "b"}));
  m.text = in.Pick<std::string>({"", "00", "ff"});
  return m;
}

}  // namespace
}  // namespace pstrain

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  pstrain::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain;
  FuzzInput in(data, size);
  HostHubOptions options;
  options.size = static_cast<int>(in.Range(1, 4));
  options.timeout = std::chrono::seconds(10);
  HubState hub(options);
  HubState::Clock::time_point now{};
  std::map<uint64_t, Sent> sent;  // by request id
  uint64_t next_id = 1;
  auto check = [&](const std::vector<HubState::Outgoing>& replies) {
    for (const HubState::Outgoing& r : replies) {
      auto it = sent.find(r.message.request_id);
      CHECK(it != sent.end()) << "a reply to no request (id " << r.message.request_id << ")";
      Sent& s = it->second;
      CHECK_EQ(++s.replies, 1) << "request " << r.message.request_id << " answered twice";
      if (r.message.type == MessageType::kError || s.op.empty()) continue;
      CHECK_EQ(r.message.tensors.size(), 1u) << "an OK collective reply without its tensor";
      CHECK_EQ(r.message.tensors[0].tensor.size(),
               ExpectedOutput(s.op, s.n, s.root, options.size, s.rank))
          << s.op << " n " << s.n << " root " << s.root << " rank " << s.rank;
    }
  };
  while (!in.empty()) {
    const uint8_t kind = in.Byte() % 4;
    if (kind == 2) {
      now += std::chrono::seconds(in.Range(0, 12));
      check(hub.Expire(now));
      continue;
    }
    Message m = kind == 3 ? Other(in) : Collective(in, options.size);
    m.request_id = next_id++;
    if (!ThroughTheWire(&m)) continue;
    Sent s;
    if (m.type == MessageType::kCollective) {
      s.op = m.text;
      s.n = m.value;
      s.root = m.root;
      s.rank = m.task_index;
    }
    sent[m.request_id] = s;
    check(hub.Handle("peer" + std::to_string(m.request_id), std::move(m), now));
  }
  check(hub.Expire(now + std::chrono::hours(1)));  // the stragglers' calls fail now
  for (const auto& [id, s] : sent) CHECK_EQ(s.replies, 1) << "request " << id << " unanswered";
  return 0;
}
