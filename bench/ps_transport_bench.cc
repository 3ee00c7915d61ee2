// Transport throughput over loopback TCP, client and server as two threads of one process:
//  (a) push + pull of one large float32 variable through Connection/ServerSocket,
//  (b) the same bytes through a plain blocking TCP socket pair: the ceiling,
//  (c) updates/s for many small variables, all in one push or one per push.
// Ends with `ratio: X.XX` = (a) over (b) in GB/s of tensor bytes, medians of alternating trials;
// before it, `small-push ratio: X.XX` = (c)'s one-variable pushes a second over a bare ZeroMQ
// round trip of the same bytes (bench/raw_zmq.h).
// With --curve, (a) and (c) over CurveZMQ against the same over plaintext instead, ending with
// `ratio: X.XX` = CURVE over plaintext for the large variable.
#include <arpa/inet.h>
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "bench/raw_tcp.h"
#include "bench/raw_zmq.h"
#include "bench/timing.h"
#include "common/config.h"
#include "common/process_memory.h"
#include "common/wire/transport.h"
#include "ps/server_task.h"
#include "tools/tool_main.h"

DEFINE_int32(mib, 64, "size of the large variable in MiB");
DEFINE_int32(iters, 10, "push+pull rounds of the large variable (and raw socket rounds) a trial");
DEFINE_int32(trials, 5,
             "alternating trials of both; the medians are compared (machines are shared)");
DEFINE_int32(small_vars, 1000, "small variables per push in the many-variables case");
DEFINE_int32(small_floats, 256, "floats per small variable");
DEFINE_int32(small_iters, 200, "pushes of all small variables at once");
DEFINE_int32(single_iters, 5000, "pushes of one small variable each");
DEFINE_bool(curve, false, "compare CurveZMQ against plaintext instead of against a raw socket");
DEFINE_bool(checks, false,
            "compare a server with the role's hostile-peer checks (one push per pull, the outlier "
            "guard) against one without, instead of against a raw socket");

namespace pstrain {
namespace {

using bench::Clock;
using bench::Median;
using bench::RawTcpPushPull;
using bench::SecondsSince;
using wire::Message;
using wire::MessageType;
constexpr std::chrono::milliseconds kTimeout(60000);

// The real server loop, as the server role runs it (ps::ServerTask), on its own thread: async
// SGD, so every push is applied to the variable (a streaming update over its bytes) before the
// reply, as in training. With `checks`, the role's hostile-peer checks too: one push per pull
// and the outlier guard at the flags' defaults (the NaN/Inf and overflow checks run either way).
class ServingTask {
 public:
  ServingTask(std::unique_ptr<wire::ServerSocket> socket, bool checks) {
    ps::ServerTaskOptions t;
    t.server.mode = ps::UpdateMode::kAsync;
    t.server.num_ps = 1;
    t.server.one_push_per_pull = checks;
    t.server.outlier_binades = checks ? 10 : 0;
    t.new_store = [] {
      auto config = ConfigNode::Parse(
          "{optimizer: {type: sgd}, learning_rate: {schedule: constant, initial: 0.001}}", "bench");
      CHECK(config.ok()) << config.status().ToString();
      return ps::VariableStore::FromConfig(config.value());
    };
    auto created = ps::ServerTask::Create(std::move(t), std::move(socket));
    CHECK(created.ok()) << created.status().ToString();
    task_ = std::move(created).value();
    thread_ = std::thread([this] {
      Status s = task_->Serve();
      CHECK(s.ok()) << s.ToString();
    });
  }
  // After the chief's shutdown.
  ~ServingTask() { thread_.join(); }

 private:
  std::unique_ptr<ps::ServerTask> task_;
  std::thread thread_;
};

// A request from the chief (worker 0) to the server of `conn`, as a real one is sent: pushes
// numbered in order per server.
Message FromChief(MessageType type, const wire::Connection* conn) {
  static std::map<const wire::Connection*, uint64_t> pushes;
  Message m;
  m.type = type;
  m.role = "chief";
  m.task_index = 0;
  m.incarnation = wire::ProcessIncarnation();
  if (type == MessageType::kPush) m.sequence = ++pushes[conn];
  return m;
}

// The chief's initialisation: the big variable and the small ones the rate tests push.
void InitializeVariables(wire::Connection* conn, size_t bytes) {
  Message init = FromChief(MessageType::kRegister, conn);
  init.tensors.push_back(
      {"w", Tensor::Filled({static_cast<int64_t>(bytes / sizeof(float))}, 0.25f)});
  for (int v = 0; v < FLAGS_small_vars; ++v) {
    init.tensors.push_back(
        {"layer" + std::to_string(v) + "/w", Tensor::Filled({FLAGS_small_floats}, 0.0f)});
  }
  Result<Message> r = conn->Call(init, kTimeout);
  CHECK(r.ok()) << r.status().ToString();
}

// GB/s of tensor bytes for push + pull of a `bytes` variable through the transport.
double TransportPushPull(wire::Connection* conn, size_t bytes, int iters) {
  const int64_t n = static_cast<int64_t>(bytes / sizeof(float));
  Message pull = FromChief(MessageType::kPull, conn);
  pull.names = {"w"};
  // A worker's gradient lives in a buffer it keeps from step to step; so does this one.
  const Tensor gradient = Tensor::Filled({n}, 0.5f);
  Clock::time_point start;
  for (int i = -1; i < iters; ++i) {  // round -1 warms up
    if (i == 0) start = Clock::now();
    Message push = FromChief(MessageType::kPush, conn);
    push.tensors = {{"w", gradient}};
    Result<Message> pushed = conn->Call(push, kTimeout);
    CHECK(pushed.ok()) << pushed.status().ToString();
    Result<Message> reply = conn->Call(pull, kTimeout);
    CHECK(reply.ok()) << reply.status().ToString();
    CHECK_EQ(reply->tensors.at(0).tensor.bytes(), bytes);
  }
  return 2.0 * bytes * iters / SecondsSince(start) / 1e9;
}

double PushRate(wire::Connection* conn, int vars, int floats, int iters) {
  Message push = FromChief(MessageType::kPush, conn);
  for (int v = 0; v < vars; ++v) {
    push.tensors.push_back({"layer" + std::to_string(v) + "/w", Tensor::Filled({floats}, 1.0f)});
  }
  Clock::time_point start = Clock::now();
  for (int i = 0; i < iters; ++i) {
    if (i > 0) push.sequence = FromChief(MessageType::kPush, conn).sequence;
    Result<Message> r = conn->Call(push, kTimeout);
    CHECK(r.ok()) << r.status().ToString();
  }
  return static_cast<double>(vars) * iters / SecondsSince(start);
}

// Rounds per second of a push then a pull of one small variable, as a worker makes them.
double PullPushRate(wire::Connection* conn, int floats, int iters) {
  Message pull = FromChief(MessageType::kPull, conn);
  pull.names = {"layer0/w"};
  Message push = FromChief(MessageType::kPush, conn);
  push.tensors.push_back({"layer0/w", Tensor::Filled({floats}, 1.0f)});
  CHECK(conn->Call(pull, kTimeout).ok());  // a worker's first pull, before its first push
  Clock::time_point start = Clock::now();
  for (int i = 0; i < iters; ++i) {
    if (i > 0) push.sequence = FromChief(MessageType::kPush, conn).sequence;
    Result<Message> r = conn->Call(push, kTimeout);
    CHECK(r.ok()) << r.status().ToString();
    CHECK(conn->Call(pull, kTimeout).ok());
  }
  return iters / SecondsSince(start);
}

// A parameter server on its own thread and one initialised client, over CURVE or plaintext.
class BenchServer {
 public:
  BenchServer(size_t bytes, bool curve, bool checks = false) {
    wire::Security server_side, client_side;
    if (curve) {
      const wire::CurveKeyPair server_keys = wire::NewCurveKeyPair().value();
      const wire::CurveKeyPair client_keys = wire::NewCurveKeyPair().value();
      server_side.own = server_keys;
      server_side.client_keys = {{client_keys.public_key, "worker-0"}};  // the chief's key
      client_side.own = client_keys;
      client_side.server_key = server_keys.public_key;
    }
    auto bound = wire::ServerSocket::Bind("tcp://127.0.0.1:0", {}, server_side);
    CHECK(bound.ok()) << bound.status().ToString();
    const std::string endpoint = (*bound)->endpoint();
    serving_ = std::make_unique<ServingTask>(std::move(bound).value(), checks);
    auto connected = wire::Connection::Connect(endpoint, {}, client_side);
    CHECK(connected.ok()) << connected.status().ToString();
    conn_ = std::move(connected).value();
    InitializeVariables(conn_.get(), bytes);
  }
  ~BenchServer() {
    CHECK(conn_->Call(FromChief(MessageType::kShutdown, conn_.get()), kTimeout).ok());
    serving_.reset();
  }
  wire::Connection* conn() { return conn_.get(); }

 private:
  std::unique_ptr<ServingTask> serving_;
  std::unique_ptr<wire::Connection> conn_;
};

// Plaintext and CURVE servers side by side, trials alternating between them.
Status CompareCurve(size_t bytes) {
  BenchServer plain(bytes, false), curve(bytes, true);
  std::printf(
      "== loopback TCP, %d MiB float32 variable, %d trials of %d push+pull rounds, %u cores: "
      "CurveZMQ vs plaintext\n",
      FLAGS_mib, FLAGS_trials, FLAGS_iters, std::thread::hardware_concurrency());
  const bench::TrialMedians medians = bench::AlternatingTrials(
      FLAGS_trials, "plaintext",
      [&] { return TransportPushPull(plain.conn(), bytes, FLAGS_iters); }, "CURVE",
      [&] { return TransportPushPull(curve.conn(), bytes, FLAGS_iters); });
  const double plain_gbps = medians.a, curve_gbps = medians.b;
  std::printf("push+pull of %d MiB (SGD applied), median: plaintext %.2f GB/s, CURVE %.2f GB/s\n",
              FLAGS_mib, plain_gbps, curve_gbps);
  for (const auto& [vars, iters] :
       {std::pair<int, int>{FLAGS_small_vars, FLAGS_small_iters}, {1, FLAGS_single_iters}}) {
    const double p = PushRate(plain.conn(), vars, FLAGS_small_floats, iters);
    const double c = PushRate(curve.conn(), vars, FLAGS_small_floats, iters);
    std::printf(
        "small variables, %d x %d floats per push: plaintext %.0f updates/s, CURVE %.0f "
        "updates/s (CURVE/plaintext %.2f)\n",
        vars, FLAGS_small_floats, p, c, c / p);
  }
  std::printf("ratio: %.2f\n", curve_gbps / plain_gbps);
  return Status::OK();
}

// Servers without and with the role's checks side by side, trials alternating between them.
Status CompareChecks(size_t bytes) {
  BenchServer none(bytes, false, false), checked(bytes, false, true);
  std::printf(
      "== loopback TCP, %d trials: a server with the role's checks (one push per pull, outlier "
      "guard) vs one without, %u cores\n",
      FLAGS_trials, std::thread::hardware_concurrency());
  std::vector<double> none_small, checked_small, none_big, checked_big;
  for (int t = 0; t < FLAGS_trials; ++t) {
    none_small.push_back(PullPushRate(none.conn(), FLAGS_small_floats, FLAGS_single_iters));
    checked_small.push_back(PullPushRate(checked.conn(), FLAGS_small_floats, FLAGS_single_iters));
    none_big.push_back(TransportPushPull(none.conn(), bytes, FLAGS_iters));
    checked_big.push_back(TransportPushPull(checked.conn(), bytes, FLAGS_iters));
    std::printf(
        "trial %d: pull+push of %d floats: %.0f/s without, %.0f/s with; %d MiB push+pull: %.2f "
        "GB/s without, %.2f GB/s with\n",
        t, FLAGS_small_floats, none_small.back(), checked_small.back(), FLAGS_mib, none_big.back(),
        checked_big.back());
  }
  const double small_none = Median(none_small), small_checked = Median(checked_small);
  std::printf(
      "pull+push of %d floats, median: %.0f/s without, %.0f/s with (%.1f us a round "
      "trip more)\n",
      FLAGS_small_floats, small_none, small_checked, 1e6 / small_checked - 1e6 / small_none);
  std::printf("%d MiB push+pull, median: %.2f GB/s without, %.2f GB/s with (ratio %.2f)\n",
              FLAGS_mib, Median(none_big), Median(checked_big),
              Median(checked_big) / Median(none_big));
  std::printf("ratio: %.2f\n", small_checked / small_none);
  return Status::OK();
}

Status Main() {
  const size_t bytes = static_cast<size_t>(FLAGS_mib) << 20;
  if (FLAGS_curve) return CompareCurve(bytes);
  if (FLAGS_checks) return CompareChecks(bytes);
  auto bound = wire::ServerSocket::Bind("tcp://127.0.0.1:0");
  CHECK(bound.ok()) << bound.status().ToString();
  const std::string endpoint = (*bound)->endpoint();
  auto serving = std::make_unique<ServingTask>(std::move(bound).value(), false);
  auto connected = wire::Connection::Connect(endpoint);
  CHECK(connected.ok()) << connected.status().ToString();
  std::unique_ptr<wire::Connection> conn = std::move(connected).value();
  InitializeVariables(conn.get(), bytes);

  std::printf(
      "== loopback TCP, %d MiB float32 variable, %d trials of %d push+pull rounds, %u cores, "
      "%s\n",
      FLAGS_mib, FLAGS_trials, FLAGS_iters, std::thread::hardware_concurrency(), AllocatorName());
  const bench::TrialMedians medians = bench::AlternatingTrials(
      FLAGS_trials, "pstrain", [&] { return TransportPushPull(conn.get(), bytes, FLAGS_iters); },
      "raw", [&] { return RawTcpPushPull(bytes, FLAGS_iters); });
  const double ours = medians.a, raw = medians.b;
  std::printf(
      "pstrain push+pull through the parameter server (SGD applied): %.2f GB/s of tensor bytes "
      "(median)\n",
      ours);
  std::printf("raw TCP socket pair send+recv: %.2f GB/s (median)\n", raw);
  const double many = PushRate(conn.get(), FLAGS_small_vars, FLAGS_small_floats, FLAGS_small_iters);
  std::printf("small variables, %d x %d floats per push: %.0f updates/s (%.0f pushes/s)\n",
              FLAGS_small_vars, FLAGS_small_floats, many, many / FLAGS_small_vars);
  // One small variable a push against a bare ZeroMQ round trip of the same bytes, alternating.
  std::vector<double> singles, raw_trips;
  for (int t = 0; t < FLAGS_trials; ++t) {
    singles.push_back(PushRate(conn.get(), 1, FLAGS_small_floats, FLAGS_single_iters));
    raw_trips.push_back(
        bench::RawZmqRoundTrips(FLAGS_small_floats * sizeof(float), FLAGS_single_iters));
  }
  const double single = bench::Median(singles), raw_trip = bench::Median(raw_trips);
  std::printf("small variables, 1 x %d floats per push: %.0f updates/s\n", FLAGS_small_floats,
              single);
  std::printf(
      "raw ZeroMQ DEALER/ROUTER round trip of the same bytes: %.0f/s (medians of %d alternating "
      "trials); small-push ratio: %.2f\n",
      raw_trip, FLAGS_trials, single / raw_trip);

  CHECK(conn->Call(FromChief(MessageType::kShutdown, conn.get()), kTimeout).ok());
  serving.reset();
  std::printf("ratio: %.2f\n", ours / raw);
  return Status::OK();
}

}  // namespace
}  // namespace pstrain

PSTRAIN_TOOL_MAIN(
    "Push+pull through a parameter server against a raw TCP socket pair (or CURVE against "
    "plaintext, or checks on against off).\nUsage: pstrain-bench-ps-transport [--mib=N --curve "
    "--checks ...]",
    pstrain::Main);
