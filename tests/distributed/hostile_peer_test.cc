// Hostile peers against a real parameter server with CURVE keys (pstrain --job_name=ps
// --curve_keys): peers with no key, with another cluster's key, with an evaluator's key and with
// a worker's key try every request their role may not make, plus floods, a message never
// finished, a peer that never reads its replies and thousands of idle connections. Each is
// refused or dropped, the server keeps answering the chief, no variable changes because of it,
// and the server's memory stays under the bound the README states.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/wire/chain_link.h"
#include "common/wire/codec.h"
#include "common/wire/curve.h"
#include "common/wire/request.h"
#include "common/wire/same_host.h"
#include "common/wire/same_host_proof.h"
#include "common/wire/transport.h"
#include "common/wire/zmq_context.h"
#include "tests/distributed/curve_server_process.h"

namespace pstrain {
namespace {

using std::chrono::milliseconds;
using testing::CurveServerProcess;
using testing::ReadFile;
using wire::Message;
using wire::MessageType;

constexpr int64_t kBigFloats = 1 << 20;  // a 4 MiB variable, so that unread replies pile up

// A request of `type` from `role` `task`, as this process (its incarnation) unless another is
// given.
Message FromThisProcess(MessageType type, const std::string& role, int task,
                        uint64_t incarnation = 0) {
  return wire::Request(type, role, task, incarnation ? incarnation : wire::ProcessIncarnation());
}

Message Push(const std::string& role, int task, uint64_t sequence, int64_t step = 0,
             uint64_t incarnation = 0) {
  Message m = FromThisProcess(MessageType::kPush, role, task, incarnation);
  m.sequence = sequence;
  m.step = step;
  m.tensors.push_back({"fc/weights", Tensor::Filled(Shape{2, 4}, 0.0f)});  // changes no value
  return m;
}

// Megabytes the process `pid` holds in memory now (VmRSS).
double ResidentMb(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return -1;
}

class HostilePeerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ps_ = std::make_unique<CurveServerProcess>("hostile", /*evaluators=*/1);
    ps_->Start(ps_->keys() + "/ps-0", {"--max_message_mb=16", "--evaluators=1"});
    chief_ = Connect("worker-0");
    Message init = FromThisProcess(MessageType::kRegister, "chief", 0);
    init.tensors.push_back({"fc/weights", Tensor::Filled(Shape{2, 4}, 1.0f)});
    init.tensors.push_back({"big", Tensor::Filled(Shape{kBigFloats}, 0.5f)});
    for (int i = 0;; ++i) {
      auto r = chief_->Call(init, milliseconds(500));
      if (r.ok()) break;
      ASSERT_TRUE(r.status().code() == StatusCode::kUnavailable && i < 40) << r.status().ToString();
    }
    baseline_mb_ = ResidentMb(ps_->pid());
  }

  // A connection with the cluster's key of `role` ("worker-1", "evaluator-0").
  std::unique_ptr<wire::Connection> Connect(const std::string& role) {
    const size_t dash = role.rfind('-');
    auto keys = wire::LoadClusterKeys(ps_->keys() + "/" + role, role.substr(0, dash),
                                      std::stoi(role.substr(dash + 1)));
    CHECK(keys.ok()) << keys.status().ToString();
    return Open(keys->ForClientOf(0).value());
  }
  std::unique_ptr<wire::Connection> Open(const wire::Security& security) {
    auto c = wire::Connection::Connect(ps_->endpoint(), {}, security);
    CHECK(c.ok()) << c.status().ToString();
    return std::move(c).value();
  }

  // The server still answers the chief at once, and holds the values the chief gave it.
  void ExpectServingAndUnchanged(const std::string& after) {
    ASSERT_TRUE(ps_->Alive()) << "the server died after " << after;
    const auto start = std::chrono::steady_clock::now();
    Message pull = FromThisProcess(MessageType::kPull, "chief", 0);
    pull.names = {"fc/weights"};
    auto r = chief_->Call(pull, milliseconds(5000));
    ASSERT_TRUE(r.ok()) << after << ": " << r.status().ToString();
    EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2000)) << after;
    for (int64_t i = 0; i < 8; ++i) {
      EXPECT_FLOAT_EQ(r->tensors.at(0).tensor[i], 1.0f) << after << " changed a variable";
    }
    const double mb = ResidentMb(ps_->pid());
    EXPECT_LT(mb, baseline_mb_ + kBoundMb)
        << after << ": the server grew from " << baseline_mb_ << " MB to " << mb << " MB";
  }

  // The README's bound for these tests: 8 queued requests per peer of at most 16 MiB
  // (--max_message_mb) plus queued replies that share the variables' buffers, for the few
  // peers that send anything, and idle connections at about 20 KB each.
  static constexpr double kBoundMb = 600;

  std::unique_ptr<CurveServerProcess> ps_;
  std::unique_ptr<wire::Connection> chief_;
  double baseline_mb_ = 0;
};

TEST_F(HostilePeerTest, EachRoleIsRefusedWhatItMayNotDoAndNothingChanges) {
  // An evaluator's key: it may pull, nothing that writes.
  auto evaluator = Connect("evaluator-0");
  ASSERT_TRUE(
      evaluator->Call(FromThisProcess(MessageType::kPull, "evaluator", 0), milliseconds(5000))
          .ok());
  std::vector<Message> evaluator_may_not = {
      Push("evaluator", 0, 1), FromThisProcess(MessageType::kCheckpoint, "evaluator", 0),
      FromThisProcess(MessageType::kShutdown, "evaluator", 0),
      FromThisProcess(MessageType::kStoreSet, "evaluator", 0),
      FromThisProcess(MessageType::kCollective, "evaluator", 0)};
  Message init = FromThisProcess(MessageType::kRegister, "evaluator", 0);
  init.tensors.push_back({"fc/weights", Tensor::Filled(Shape{2, 4}, 9.0f)});
  evaluator_may_not.push_back(init);
  Message restore = FromThisProcess(MessageType::kRestore, "evaluator", 0);
  restore.step = 1;  // roll every shard back to an old checkpoint
  evaluator_may_not.push_back(restore);
  for (const Message& m : evaluator_may_not) {
    auto r = evaluator->Call(m, milliseconds(5000));
    ASSERT_FALSE(r.ok()) << "an evaluator's " << wire::MessageTypeName(m.type) << " went through";
    EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied) << r.status().ToString();
  }

  // A worker's key: not the chief's requests, and not anyone else's name.
  auto worker = Connect("worker-1");
  Message worker_init = init;
  worker_init.role = "worker";
  worker_init.task_index = 1;
  Message worker_restore = restore;
  worker_restore.role = "worker";
  worker_restore.task_index = 1;
  std::vector<Message> worker_may_not = {
      worker_init,
      worker_restore,
      FromThisProcess(MessageType::kCheckpoint, "worker", 1),
      FromThisProcess(MessageType::kShutdown, "worker", 1),
      FromThisProcess(MessageType::kShutdown, "chief", 0),  // claims the chief's name
      Push("worker", 0, 1),                                 // claims worker 0's name
      Push("evaluator", 0, 1)};
  for (const Message& m : worker_may_not) {
    auto r = worker->Call(m, milliseconds(5000));
    ASSERT_FALSE(r.ok()) << "worker 1's " << wire::MessageTypeName(m.type) << " as " << m.role
                         << " " << m.task_index << " went through";
    EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied) << r.status().ToString();
  }
  EXPECT_TRUE(ps_->LogHas("claims to come from 'chief' task 0 but its key is worker-1's"))
      << ReadFile(ps_->log_path());

  // A server's key is let in to replicate, and to do nothing else; until replication is enabled
  // a record is refused too, by name. A worker's key may not replicate.
  auto server = Connect("ps-0");
  auto as_server = server->Call(FromThisProcess(MessageType::kPull, "ps", 0), milliseconds(5000));
  ASSERT_FALSE(as_server.ok()) << "a server's pull went through";
  EXPECT_EQ(as_server.status().code(), StatusCode::kPermissionDenied)
      << as_server.status().ToString();
  Message record = FromThisProcess(MessageType::kReplicate, "ps", 0);
  record.sequence = 1;
  record.tensors.push_back({"fc/weights", Tensor::Filled(Shape{2, 4}, 9.0f)});
  auto replicated = server->Call(record, milliseconds(5000));
  ASSERT_FALSE(replicated.ok()) << "a record was applied with replication off";
  EXPECT_EQ(replicated.status().code(), StatusCode::kFailedPrecondition)
      << replicated.status().ToString();
  EXPECT_NE(replicated.status().message().find("replication is not enabled on this server"),
            std::string::npos)
      << replicated.status().ToString();
  Message worker_record = record;
  worker_record.role = "worker";
  worker_record.task_index = 1;
  auto from_worker = worker->Call(worker_record, milliseconds(5000));
  ASSERT_FALSE(from_worker.ok());
  EXPECT_EQ(from_worker.status().code(), StatusCode::kPermissionDenied)
      << from_worker.status().ToString();

  // Pushes that cannot hurt: empty, unnumbered, out of range, skipping ahead (the 2^64-1
  // attack), or from an older process of the same worker.
  const uint64_t me = wire::ProcessIncarnation();
  ASSERT_TRUE(worker->Call(Push("worker", 1, 1, 0, me), milliseconds(5000)).ok());
  Message empty = Push("worker", 1, 2, 0, me);
  empty.tensors.clear();
  Message unnumbered = Push("worker", 1, 0, 0, me);
  Message zero_incarnation = Push("worker", 1, 2, 0, me);
  zero_incarnation.incarnation = 0;
  for (const Message& m :
       {empty, unnumbered, zero_incarnation, Push("worker", 1, 2, -1, me),
        Push("worker", 1, 2, int64_t{1} << 62, me), Push("worker", 1, UINT64_MAX, 0, me)}) {
    auto r = worker->Call(m, milliseconds(5000));
    ASSERT_FALSE(r.ok()) << "push " << m.sequence << " at step " << m.step << " went through";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  }
  // (A worker pushes once per pull: each push below follows a pull.)
  ASSERT_TRUE(
      worker->Call(FromThisProcess(MessageType::kPull, "worker", 1, me), milliseconds(5000)).ok());
  ASSERT_TRUE(worker->Call(Push("worker", 1, 2, 0, me), milliseconds(5000)).ok())
      << "the real next push is refused after the refused ones";
  ASSERT_TRUE(
      worker->Call(FromThisProcess(MessageType::kPull, "worker", 1, me + 4096), milliseconds(5000))
          .ok());
  ASSERT_TRUE(worker->Call(Push("worker", 1, 1, 0, me + 4096), milliseconds(5000)).ok());
  auto zombie = worker->Call(Push("worker", 1, 3, 0, me), milliseconds(5000));
  ASSERT_FALSE(zombie.ok()) << "an older process of worker 1 was believed after a newer one";
  EXPECT_NE(zombie.status().message().find("a stale process is refused"), std::string::npos)
      << zombie.status().ToString();

  // No key, and another cluster's worker key: not even a heartbeat gets an answer.
  const std::string other_keys = ps_->keys() + "-other";
  ASSERT_TRUE(wire::WriteClusterKeys(other_keys, 1, 2, 0).ok());
  auto other = wire::LoadClusterKeys(other_keys + "/worker-1", "worker", 1).value();
  wire::Security other_security = other.ForClientOf(0).value();
  // Trusting the right server, so only its own key is wrong.
  other_security.server_key =
      wire::LoadClusterKeys(ps_->keys() + "/worker-1", "worker", 1)->ps_keys[0];
  for (const wire::Security& s : {wire::Security{}, other_security}) {
    auto stranger = Open(s);
    for (MessageType t : {MessageType::kHeartbeat, MessageType::kPull, MessageType::kShutdown}) {
      auto r = stranger->Call(FromThisProcess(t, "chief", 0), milliseconds(3000));
      ASSERT_FALSE(r.ok()) << "a stranger's " << wire::MessageTypeName(t) << " was answered";
    }
  }

  // Three pushes of zero gradients were applied (the step moved by exactly that), and nothing
  // else: no value changed, the server did not shut down.
  ExpectServingAndUnchanged("the refused requests");
  Message pull = FromThisProcess(MessageType::kPull, "chief", 0);
  pull.names = {"fc/weights"};
  EXPECT_EQ(chief_->Call(pull, milliseconds(5000))->step, 3);
}

// The global step a pull of the chief's reports.
int64_t ChiefStep(wire::Connection* chief) {
  Message pull = FromThisProcess(MessageType::kPull, "chief", 0);
  pull.names = {"fc/weights"};
  auto r = chief->Call(pull, milliseconds(5000));
  CHECK(r.ok()) << r.status().ToString();
  return r->step;
}

// 900 zero-gradient pushes moved the global step by 900 in 0.4 s before; now a worker's key
// moves it once per pull of its own.
TEST_F(HostilePeerTest, AWorkersKeyMovesTheGlobalStepOncePerPull) {
  auto worker = Connect("worker-1");
  const uint64_t me = wire::ProcessIncarnation();
  const Message pull = FromThisProcess(MessageType::kPull, "worker", 1, me);
  ASSERT_TRUE(worker->Call(pull, milliseconds(5000)).ok());
  ASSERT_TRUE(worker->Call(Push("worker", 1, 1, 0, me), milliseconds(5000)).ok());
  int refused = 0;
  for (int i = 0; i < 900; ++i) {
    auto r = worker->Call(Push("worker", 1, 2, 0, me), milliseconds(5000));
    if (r.ok()) continue;
    ++refused;
    EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied) << r.status().ToString();
    if (refused == 1) {
      EXPECT_NE(r.status().message().find("a worker pushes one step per pull"), std::string::npos)
          << r.status().ToString();
    }
  }
  EXPECT_EQ(refused, 900) << "pushes without a pull went through";
  EXPECT_EQ(ChiefStep(chief_.get()), 1) << "the refused pushes moved the global step";
  // After a pull the next push is taken, and a retry of it is answered, not applied again.
  ASSERT_TRUE(worker->Call(pull, milliseconds(5000)).ok());
  ASSERT_TRUE(worker->Call(Push("worker", 1, 2, 0, me), milliseconds(5000)).ok());
  ASSERT_TRUE(worker->Call(Push("worker", 1, 2, 0, me), milliseconds(5000)).ok())
      << "a retried push was refused";
  EXPECT_EQ(ChiefStep(chief_.get()), 2);
  ExpectServingAndUnchanged("900 pushes without pulls");
}

// A heartbeat under worker 1's key from a process "started" at 2^52 microseconds used to lock
// the real worker 1 out for good. Now a number ahead of the server's clock is refused, and a
// forged newer one fences the real process only while the forger keeps speaking.
TEST_F(HostilePeerTest, AForgedIncarnationCannotLockTheRealProcessOut) {
  auto real = Connect("worker-1");
  auto forger = Connect("worker-1");
  const uint64_t me = wire::ProcessIncarnation();
  const Message beat = FromThisProcess(MessageType::kHeartbeat, "worker", 1, me);
  ASSERT_TRUE(real->Call(beat, milliseconds(5000)).ok());

  auto far = forger->Call(FromThisProcess(MessageType::kHeartbeat, "worker", 1, UINT64_MAX),
                          milliseconds(5000));
  ASSERT_FALSE(far.ok()) << "an incarnation from the far future was believed";
  EXPECT_EQ(far.status().code(), StatusCode::kInvalidArgument) << far.status().ToString();
  EXPECT_NE(far.status().message().find("after this server's clock"), std::string::npos)
      << far.status().ToString();
  ASSERT_TRUE(real->Call(beat, milliseconds(5000)).ok()) << "the real process was locked out";

  // Within the clock skew: believed, as a restart of worker 1 would be, and the real (older)
  // process is fenced while the newer speaks...
  const uint64_t soon =
      (static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count()) +
       1000000)
      << 12;
  ASSERT_TRUE(
      forger->Call(FromThisProcess(MessageType::kHeartbeat, "worker", 1, soon), milliseconds(5000))
          .ok());
  auto fenced = real->Call(beat, milliseconds(5000));
  ASSERT_FALSE(fenced.ok());
  EXPECT_NE(fenced.status().message().find("a stale process is refused"), std::string::npos)
      << fenced.status().ToString();
  EXPECT_EQ(fenced.status().message().find(std::to_string(soon)), std::string::npos)
      << "the refusal told the newer process's incarnation";
  // ...and believed again once the forger has been silent for the peer timeout (5 s).
  const auto start = std::chrono::steady_clock::now();
  bool back = false;
  while (!back && std::chrono::steady_clock::now() - start < std::chrono::seconds(12)) {
    std::this_thread::sleep_for(milliseconds(500));
    back = real->Call(beat, milliseconds(5000)).ok();
  }
  EXPECT_TRUE(back) << "the real process was still refused 12 s after one forged heartbeat";
  EXPECT_TRUE(ps_->LogHas("an older process of it speaks again")) << ReadFile(ps_->log_path());
}

// A wait at another barrier under worker 1's key used to cancel the real worker 1's wait at the
// final barrier, which then never released. Waits are per barrier now, and bounded.
TEST_F(HostilePeerTest, AWaitElsewhereCannotCancelTheRealWaitAtABarrier) {
  auto barrier = [](const std::string& role, int task, const std::string& name, uint64_t inc) {
    Message m = FromThisProcess(MessageType::kBarrier, role, task, inc);
    m.text = name;
    m.value = 3;  // workers 0 and 1, evaluator 0
    return m;
  };
  const uint64_t me = wire::ProcessIncarnation();
  auto real = Connect("worker-1");
  Result<Message> real_done = Unavailable("not answered");
  std::thread real_waits(
      [&] { real_done = real->Call(barrier("worker", 1, "done", me), milliseconds(20000)); });
  std::this_thread::sleep_for(milliseconds(300));
  auto forger = Connect("worker-1");
  ASSERT_TRUE(forger->Send(barrier("worker", 1, "elsewhere", me + 4096)).ok());
  std::this_thread::sleep_for(milliseconds(300));
  auto evaluator = Connect("evaluator-0");
  Result<Message> evaluator_done = Unavailable("not answered");
  std::thread evaluator_waits([&] {
    evaluator_done = evaluator->Call(barrier("evaluator", 0, "done", me), milliseconds(20000));
  });
  std::this_thread::sleep_for(milliseconds(300));
  auto chief_done = chief_->Call(barrier("chief", 0, "done", me), milliseconds(20000));
  real_waits.join();
  evaluator_waits.join();
  ASSERT_TRUE(chief_done.ok()) << "the final barrier did not release: "
                               << chief_done.status().ToString();
  EXPECT_TRUE(real_done.ok()) << real_done.status().ToString();
  EXPECT_TRUE(evaluator_done.ok()) << evaluator_done.status().ToString();

  // The key holds at most 4 waits: with "elsewhere" held, 3 more, and the 5th is refused.
  for (const char* name : {"a", "b", "c", "d"}) {
    ASSERT_TRUE(forger->Send(barrier("worker", 1, name, me + 4096)).ok());
  }
  auto refused = forger->Receive(milliseconds(5000));
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_EQ(refused->type, MessageType::kError);
  EXPECT_NE(refused->text.find("already waits at 4 other barriers"), std::string::npos)
      << refused->text;
  ExpectServingAndUnchanged("waits at invented barriers");
}

// A worker's wild but finite gradient (a GPU fault, a bad batch, a key in the wrong hands) after
// ordinary ones: applied scaled down to ten binades above the median of the pushes so far, and
// logged, instead of moving the model by a million times the usual step.
TEST_F(HostilePeerTest, AnOutlierGradientIsScaledDownToTheBound) {
  auto worker = Connect("worker-1");
  const uint64_t me = wire::ProcessIncarnation();
  const Message pull = FromThisProcess(MessageType::kPull, "worker", 1, me);
  auto pushed = [&](uint64_t sequence, float g) {
    EXPECT_TRUE(worker->Call(pull, milliseconds(5000)).ok());
    Message push = Push("worker", 1, sequence, 0, me);
    push.tensors.at(0).tensor = Tensor::Filled(Shape{2, 4}, g);
    auto r = worker->Call(push, milliseconds(5000));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
  };
  auto weight = [&] {
    Message p = FromThisProcess(MessageType::kPull, "chief", 0);
    p.names = {"fc/weights"};
    return chief_->Call(p, milliseconds(5000))->tensors.at(0).tensor[0];
  };
  // 40 ordinary pushes of 2^-10 and back (SGD, learning rate 1: the weight returns to 1).
  for (uint64_t i = 1; i <= 40; ++i) pushed(i, i % 2 ? 0x1p-10f : -0x1p-10f);
  ASSERT_FLOAT_EQ(weight(), 1.0f);
  pushed(41, 1e6f);  // 2^19.9: 30 binades above the median
  const float moved = 1.0f - weight();
  EXPECT_GT(moved, 0.0f) << "the outlier was not applied at all";
  EXPECT_LE(moved, 0x1p1f) << "the outlier moved the weight by " << moved
                           << "; the bound is 2^0 (ten binades above 2^-10, the element's binade)";
  EXPECT_TRUE(ps_->LogHas("binades above the bound")) << ReadFile(ps_->log_path());
}

// A raw ZeroMQ DEALER with worker 1's key, for messages a Connection would never send.
class RawPeer {
 public:
  RawPeer(const wire::ClusterKeys& keys, const std::string& endpoint, int server = 0) {
    socket_ = zmq_socket(wire::ZmqContext(), ZMQ_DEALER);
    const int hwm = 0, linger = 0;  // queue everything we are asked to send
    zmq_setsockopt(socket_, ZMQ_SNDHWM, &hwm, sizeof(hwm));
    zmq_setsockopt(socket_, ZMQ_LINGER, &linger, sizeof(linger));
    const auto set = [&](int option, const std::string& key) {
      zmq_setsockopt(socket_, option, key.data(), key.size());
    };
    if (endpoint.rfind("ipc://", 0) == 0) {  // the same-host socket: a proof, not CURVE
      set(ZMQ_PLAIN_USERNAME, keys.own_name);
      set(ZMQ_PLAIN_PASSWORD,
          wire::SameHostProof(keys.own.secret_key, keys.ps_keys[server], keys.own_name).value());
    } else {
      set(ZMQ_CURVE_PUBLICKEY, keys.own.public_key);
      set(ZMQ_CURVE_SECRETKEY, keys.own.secret_key);
      set(ZMQ_CURVE_SERVERKEY, keys.ps_keys[server]);
    }
    static int next = 0;
    const std::string monitor = "inproc://raw-peer-" + std::to_string(next++);
    zmq_socket_monitor(socket_, monitor.c_str(), ZMQ_EVENT_DISCONNECTED);
    events_ = zmq_socket(wire::ZmqContext(), ZMQ_PAIR);
    zmq_setsockopt(events_, ZMQ_LINGER, &linger, sizeof(linger));
    zmq_connect(events_, monitor.c_str());
    zmq_connect(socket_, endpoint.c_str());
  }
  ~RawPeer() {
    zmq_socket_monitor(socket_, nullptr, 0);
    zmq_close(events_);
    zmq_close(socket_);
  }
  // Whether the server has dropped this peer's connection since it was made.
  bool Disconnected() {
    zmq_msg_t event;
    zmq_msg_init(&event);
    const bool any = zmq_msg_recv(&event, events_, ZMQ_DONTWAIT) >= 0;
    zmq_msg_close(&event);
    disconnected_ = disconnected_ || any;
    return disconnected_;
  }
  void Send(const std::string& frame, bool more) {
    zmq_send(socket_, frame.data(), frame.size(), more ? ZMQ_SNDMORE : 0);
  }
  // As Send, without a copy: `frame` must outlive the socket.
  void SendConst(const std::string& frame, bool more) {
    zmq_send_const(socket_, frame.data(), frame.size(), more ? ZMQ_SNDMORE : 0);
  }
  // The next reply's header, or "" after `timeout`.
  Result<Message> Receive(milliseconds timeout) {
    zmq_pollitem_t item{socket_, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, timeout.count()) <= 0) return Unavailable("no reply");
    std::string header;
    for (int more = 1; more;) {
      zmq_msg_t msg;
      zmq_msg_init(&msg);
      zmq_msg_recv(&msg, socket_, 0);
      if (header.empty()) header.assign(static_cast<char*>(zmq_msg_data(&msg)), zmq_msg_size(&msg));
      more = zmq_msg_more(&msg);
      zmq_msg_close(&msg);
    }
    return wire::Decode({{header.data(), header.size(), nullptr}}, {}, "the test");
  }

 private:
  void* socket_ = nullptr;
  void* events_ = nullptr;
  bool disconnected_ = false;
};

TEST_F(HostilePeerTest, FloodsSilentReadersAndIdleConnectionsStallNothing) {
  const auto worker_keys = wire::LoadClusterKeys(ps_->keys() + "/worker-1", "worker", 1).value();
  const std::string pull_header =
      wire::Encode(FromThisProcess(MessageType::kPull, "worker", 1)).value().header;

  // A frame flood: one message of 10,000 frames (the limit is 4,096) is refused whole.
  {
    RawPeer flood(worker_keys, ps_->endpoint());
    flood.Send(pull_header, true);
    for (int i = 0; i < 10000; ++i) flood.Send("x", i + 1 < 10000);
    auto r = flood.Receive(milliseconds(10000));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->type, MessageType::kError);
    EXPECT_NE(r->text.find("frames"), std::string::npos) << r->text;
  }
  ExpectServingAndUnchanged("a 10,000-frame message");

  // A peer that asks for 4 MiB again and again and never reads a reply: the server's replies
  // to it are dropped once its queue is full instead of blocking the server for 60 s.
  Message big_pull = FromThisProcess(MessageType::kPull, "worker", 1);
  big_pull.names = {"big"};
  const std::string big_header = wire::Encode(big_pull).value().header;
  RawPeer deaf(worker_keys, ps_->endpoint());
  for (int i = 0; i < 400; ++i) deaf.Send(big_header, false);
  for (int i = 0; i < 10; ++i) {
    ExpectServingAndUnchanged("400 pulls of 4 MiB from a peer that reads no reply");
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_TRUE(ps_->LogHas("replies queued that it does not read: reply dropped"))
      << ReadFile(ps_->log_path());

  // Thousands of connections that never handshake (the limit of this process's descriptors,
  // up to 10,000): the chief is still served, and they are closed after the handshake timeout.
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = files.rlim_max;
  setrlimit(RLIMIT_NOFILE, &files);
  const int connections = static_cast<int>(std::min<rlim_t>(10000, files.rlim_cur - 200));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(ps_->endpoint().substr(16))));
  std::vector<int> fds;
  // Meanwhile the chief pulls every 200 ms: no wait may exceed 2 s.
  std::atomic<bool> storm{true};
  std::atomic<int64_t> slowest_ms{0}, pulls{0};
  std::thread chief_pulls([&] {
    while (storm) {
      const auto start = std::chrono::steady_clock::now();
      Message pull = FromThisProcess(MessageType::kPull, "chief", 0);
      pull.names = {"fc/weights"};
      if (!chief_->Call(pull, milliseconds(10000)).ok()) slowest_ms = 1 << 30;
      const auto ms =
          std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start)
              .count();
      slowest_ms = std::max<int64_t>(slowest_ms, ms);
      ++pulls;
      std::this_thread::sleep_for(milliseconds(200));
    }
  });
  for (int i = 0; i < connections; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) break;
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(fd);
      break;
    }
    fds.push_back(fd);
  }
  storm = false;
  chief_pulls.join();
  std::cout << "opened " << fds.size() << " idle connections (asked for " << connections
            << "); meanwhile the chief's " << pulls << " pulls took at most " << slowest_ms
            << " ms\n";
  EXPECT_LT(slowest_ms, 2000) << "the connections stalled the server";
  EXPECT_GE(fds.size(), 1000u);
  std::this_thread::sleep_for(milliseconds(1000));
  ExpectServingAndUnchanged(std::to_string(fds.size()) + " idle connections");
  std::cout << "server memory with them: " << ResidentMb(ps_->pid()) << " MB (baseline "
            << baseline_mb_ << " MB)\n";
  for (int fd : fds) close(fd);
  ExpectServingAndUnchanged("closing the idle connections");
}

// A message never finished, from a peer with worker 1's key (over TCP, or over the server's
// same-host socket when `same_host`), while the real worker 0 trains (synthetic steps, over its
// same-host socket): ZeroMQ keeps the frames out of the server's sight until the last one, so the
// server cuts the connection once it holds more of the message than a worker's message may be,
// logs it naming the keys let in from the peer's host (over the same-host socket, from the
// peer's process), grows by less than 64 MB, and the worker trains on to its last step. ZeroMQ
// sends a message only once it has its last frame, so this one has an end, 256 MiB away: the
// server sees it unfinished while it arrives, as it would see one never finished. `flags`: the
// server's beyond the test's; `bound`: its start line's bound.
void ExpectAnUnfinishedMessageCutWhileAWorkerTrains(const std::string& name,
                                                    const std::vector<std::string>& flags,
                                                    const std::string& bound,
                                                    bool same_host = false) {
  CurveServerProcess ps(name);
  ps.Start(ps.keys() + "/ps-0", flags);
  ASSERT_TRUE(
      ps.LogHas("ps 0: cuts a connection holding more of an unfinished message than " + bound))
      << ReadFile(ps.log_path());
  const std::string dir = ::testing::TempDir() + "/unfinished_worker_" + std::to_string(ps.port());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::vector<std::string> worker = testing::SingleServerArgs(ps.port(), dir + "/train");
  worker[1] = "--job_name=worker";
  constexpr int kSteps = 150;
  worker.insert(worker.end(),
                {"--device=cpu", "--synthetic_step_ms=20", "--max_steps=" + std::to_string(kSteps),
                 "--histogram_every_n_steps=0", "--log_every_n_steps=10",
                 "--curve_keys=" + ps.keys() + "/worker-0"});
  pid_t worker_pid = testing::SpawnProcess(worker, dir + "/worker.log");
  const auto worker_log_has = [&](const std::string& text, int seconds) {
    for (int i = 0; i < seconds * 20; ++i) {
      if (ReadFile(dir + "/worker.log").find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(milliseconds(50));
    }
    return false;
  };
  ASSERT_TRUE(worker_log_has("step 10/", 30)) << ReadFile(dir + "/worker.log");
  const double baseline_mb = ResidentMb(ps.pid());

  const auto keys = wire::LoadClusterKeys(ps.keys() + "/worker-1", "worker", 1).value();
  const std::string endpoint = same_host ? wire::SameHostEndpoint(keys, 0) : ps.endpoint();
  ASSERT_FALSE(endpoint.empty()) << "no same-host socket beside " << keys.dir;
  RawPeer unfinished(keys, endpoint);
  static const std::string frame(64 << 10, 'x');
  unfinished.Send(wire::Encode(FromThisProcess(MessageType::kPull, "worker", 1)).value().header,
                  true);
  for (int i = 1; i < 4096; ++i) unfinished.SendConst(frame, i + 1 < 4096);
  double highest_mb = 0;
  for (int i = 0; i < 2000 && !unfinished.Disconnected(); ++i) {
    highest_mb = std::max(highest_mb, ResidentMb(ps.pid()));
    std::this_thread::sleep_for(milliseconds(5));
  }
  highest_mb = std::max(highest_mb, ResidentMb(ps.pid()));
  std::cout << "256 MiB of an unfinished message: the server held at most " << highest_mb
            << " MB (baseline " << baseline_mb << " MB)\n";
  EXPECT_TRUE(unfinished.Disconnected()) << "the server kept the connection";
  EXPECT_LT(highest_mb, baseline_mb + 64)
      << "the unfinished message grew the server (its cut, with how long the guard had not "
         "looked, is in its log):\n"
      << ReadFile(ps.log_path());
  const std::string host = same_host ? "localhost" : "127.0.0.1";
  EXPECT_TRUE(
      ps.LogHas("ps 0: cut the connection of a peer that finished no message (keys let "
                "in from " +
                host + ": worker 1) from " + host + ":"))
      << ReadFile(ps.log_path());
  const std::string last = "reached step " + std::to_string(kSteps);
  EXPECT_TRUE(worker_log_has(last, 30)) << ReadFile(dir + "/worker.log");
  EXPECT_TRUE(ps.Alive());
  testing::KillProcess(&worker_pid);
}

TEST(HostileTrainingTest, AMessageNeverFinishedIsCutNearItsBoundWhileAWorkerTrainsOn) {
  ExpectAnUnfinishedMessageCutWhileAWorkerTrains(
      "unfinished", {"--max_message_mb=16"},
      "a client's messages up to 16 MiB (--max_message_mb, below a push of every variable");
}

// The same over the server's same-host socket, which the kernel counts no bytes of: the
// process counts what ZeroMQ reads there itself (common/wire/unix_read_count.h).
TEST(HostileTrainingTest, AMessageNeverFinishedOverTheSameHostSocketIsCutWhileAWorkerTrainsOn) {
  ExpectAnUnfinishedMessageCutWhileAWorkerTrains(
      "unfinished_same_host", {},
      "a client's messages up to 17 MiB (a push of every variable: 40 B)", /*same_host=*/true);
}

// Under the default --max_message_mb (4 GiB) the bound is what a worker sends this server: a
// push of the config's every variable (tests/distributed/testdata/sgd.yaml: 10 floats), with
// headroom, logged at start.
TEST(HostileTrainingTest, UnderTheDefaultFlagsAMessageNeverFinishedIsCutNearAWorkersLargest) {
  ExpectAnUnfinishedMessageCutWhileAWorkerTrains(
      "unfinished_default", {},
      "a client's messages up to 17 MiB (a push of every variable: 40 B)");
}

// A server's copy to a joiner is its first message on a fresh TCP connection (CURVE, no
// same-host socket), and larger than anything a worker may send (tests/distributed/testdata/
// wide_adam.yaml: 32 MiB of variables, 96 MiB with Adam's slots): it is taken whole, because a
// connection from a host that a server's key came in from may hold a copy before its first
// message names it. A worker's key from that same host, once its first message named it, is cut
// at a worker's bound.
TEST(HostileReplicaTest, AServersCopyAsItsFirstMessageIsTakenAndAWorkersLikeIsCut) {
  CurveServerProcess ps("copy_first", 0, /*servers=*/2);
  const std::string hosts = "127.0.0.1:" + std::to_string(testing::PickPort()) +
                            ",127.0.0.1:" + std::to_string(ps.port());
  ps.Start(ps.keys() + "/ps-1",
           {"--task_index=1", "--replicas=1", "--ps_hosts=" + hosts, "--same_host_ipc=false",
            "--config=" + testing::SourceDir() + "/tests/distributed/testdata/wide_adam.yaml"});
  ASSERT_TRUE(
      ps.LogHas("ps 1: cuts a connection holding more of an unfinished message than "
                "a client's messages up to 57 MiB (a push of every variable: 33570816 B), "
                "a server's up to 137 MiB (a replica copy"))
      << ReadFile(ps.log_path());
  auto open = [&](const std::string& job, int task) {
    const std::string name = job + "-" + std::to_string(task);
    auto keys = wire::LoadClusterKeys(ps.keys() + "/" + name, job, task);
    CHECK(keys.ok()) << keys.status().ToString();
    auto c = wire::Connection::Connect(ps.endpoint(), {}, keys->ForClientOf(1).value());
    CHECK(c.ok()) << c.status().ToString();
    return std::move(c).value();
  };
  auto chief = open("worker", 0);
  Message map = FromThisProcess(MessageType::kShardMap, "chief", 0);
  map.map_epoch = 1;
  map.chains = {{0, {0}, {1}}, {1, {1}, {}}};  // ps-1 joins shard 0 behind ps-0
  for (int i = 0;; ++i) {
    auto r = chief->Call(map, milliseconds(500));
    if (r.ok()) break;
    ASSERT_TRUE(r.status().code() == StatusCode::kUnavailable && i < 40) << r.status().ToString();
  }

  auto predecessor = open("ps", 0);
  Message copy = FromThisProcess(MessageType::kReplicaCopy, "ps", 0);
  copy.shard = 0;
  copy.map_epoch = 1;
  copy.link = wire::NewChainLink();
  for (int v = 0; v < 8; ++v) {  // in frames of 4 MiB, so that the server sees it arrive
    for (const char* slot : {"", "/m", "/v"}) {
      copy.tensors.push_back(
          {"v" + std::to_string(v) + slot, Tensor::Filled(Shape{1 << 20}, 0.0f)});
    }
  }
  copy.text = "?";  // refused for its fingerprint once taken whole, naming the server's
  auto refused = predecessor->Call(copy, milliseconds(20000));
  ASSERT_FALSE(refused.ok());
  const std::string why = refused.status().message();
  const size_t from = why.find("this server '") + 13, to = why.find("'; replicas");
  ASSERT_TRUE(from > 13 && to != std::string::npos && to > from) << refused.status().ToString();
  copy.text = why.substr(from, to - from);
  auto installed = predecessor->Call(copy, milliseconds(20000));
  ASSERT_TRUE(installed.ok()) << installed.status().ToString();
  EXPECT_EQ(ReadFile(ps.log_path()).find("cut the connection"), std::string::npos)
      << ReadFile(ps.log_path());

  const auto keys = wire::LoadClusterKeys(ps.keys() + "/worker-1", "worker", 1).value();
  RawPeer unfinished(keys, ps.endpoint(), /*server=*/1);
  Message pull = FromThisProcess(MessageType::kPull, "worker", 1);
  unfinished.Send(wire::Encode(pull).value().header, false);
  ASSERT_TRUE(unfinished.Receive(milliseconds(5000)).ok()) << "its first message is answered";
  static const std::string frame(64 << 10, 'x');
  unfinished.Send(wire::Encode(pull).value().header, true);
  for (int i = 1; i < 4096; ++i) unfinished.SendConst(frame, i + 1 < 4096);
  for (int i = 0; i < 2000 && !unfinished.Disconnected(); ++i) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_TRUE(unfinished.Disconnected()) << "the server kept the connection";
  EXPECT_TRUE(ps.LogHas("ps 1: cut the connection of worker 1 from 127.0.0.1:"))
      << ReadFile(ps.log_path());
  EXPECT_TRUE(ps.LogHas("more than the 57 MiB a peer of its key may make it hold"))
      << ReadFile(ps.log_path());
  EXPECT_TRUE(ps.Alive());
}

// A worker's key with a finite but huge gradient (1e30: its square overflows Adam's second
// moment) against a real Adam server: refused, naming the variable, the worker and the step;
// nothing changes; the same worker's sane push afterwards applies and leaves the model finite.
TEST(HostileGradientTest, AGradientThatWouldOverflowTheOptimizerChangesNothing) {
  CurveServerProcess ps("huge_gradient");
  ps.Start(ps.keys() + "/ps-0",
           {"--config=" + testing::SourceDir() + "/tests/distributed/testdata/adam.yaml"});
  auto connect = [&](const std::string& role, int task) {
    auto keys =
        wire::LoadClusterKeys(ps.keys() + "/" + role + "-" + std::to_string(task), role, task);
    CHECK(keys.ok()) << keys.status().ToString();
    auto c = wire::Connection::Connect(ps.endpoint(), {}, keys->ForClientOf(0).value());
    CHECK(c.ok()) << c.status().ToString();
    return std::move(c).value();
  };
  auto chief = connect("worker", 0);
  Message init = FromThisProcess(MessageType::kRegister, "chief", 0);
  init.tensors.push_back({"fc/weights", Tensor::Filled(Shape{2, 4}, 1.0f)});
  for (int i = 0;; ++i) {
    auto r = chief->Call(init, milliseconds(500));
    if (r.ok()) break;
    ASSERT_TRUE(r.status().code() == StatusCode::kUnavailable && i < 40) << r.status().ToString();
  }
  auto pulled = [&] {
    Message pull = FromThisProcess(MessageType::kPull, "chief", 0);
    pull.names = {"fc/weights"};
    auto r = chief->Call(pull, milliseconds(5000));
    CHECK(r.ok()) << r.status().ToString();
    return r->tensors.at(0).tensor;
  };

  auto worker = connect("worker", 1);
  Message huge = Push("worker", 1, 1, /*step=*/3);
  huge.tensors.at(0).tensor[5] = 1e30f;
  auto refused = worker->Call(huge, milliseconds(5000));
  ASSERT_FALSE(refused.ok()) << "a 1e30 gradient was applied";
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << refused.status().ToString();
  for (const char* part :
       {"worker 1's push of step 3 refused",
        "gradient for 'fc/weights' has an element of magnitude 1e+30", "adam's state"}) {
    EXPECT_NE(refused.status().message().find(part), std::string::npos)
        << part << " not in: " << refused.status().message();
  }
  EXPECT_TRUE(ps.LogHas("worker 1's push of step 3 refused")) << ReadFile(ps.log_path());
  Tensor after = pulled();
  for (int64_t i = 0; i < after.size(); ++i) EXPECT_EQ(after[i], 1.0f) << "element " << i;

  Message sane = Push("worker", 1, 2, /*step=*/3);
  sane.tensors.at(0).tensor = Tensor::Filled(Shape{2, 4}, 0.5f);
  ASSERT_TRUE(worker->Call(sane, milliseconds(5000)).ok());
  after = pulled();
  for (int64_t i = 0; i < after.size(); ++i) {
    EXPECT_TRUE(std::isfinite(after[i])) << "element " << i;
    EXPECT_LT(after[i], 1.0f) << "element " << i << ": the sane push did not apply";
  }
}

}  // namespace
}  // namespace pstrain
