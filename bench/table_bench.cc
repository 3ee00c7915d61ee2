// An embedding table spread over real parameter servers (pstrain --job_name=ps), as issue 30
// measures it: every row of a table of --rows rows x --dimension floats is created first (row
// pulls of every id, each to its owner, common/row_owner.h), then --steps steps of a worker's
// row traffic: --batch examples of --features Zipf-distributed ids each, their distinct ids
// pulled from their owners and gradient rows pushed back (Adagrad on the servers). Printed: the
// fill's time, each server's resident memory, and per step the bytes moved and the CPU all
// servers spent (utime + stime from /proc/<pid>/stat), against pushing and pulling the same
// table whole as a dense variable: measured on one server at --dense_rows rows and scaled
// linearly to --rows (a dense step moves and updates every row). The last line is
// `saved: bytes xN, server CPU xM` (dense over sparse).
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "bench/raw_tcp.h"
#include "bench/timing.h"
#include "common/row_owner.h"
#include "common/wire/transport.h"
#include "tools/tool_main.h"

DEFINE_string(pstrain, "build/pstrain", "the pstrain binary the servers run");
DEFINE_int64(rows, 1000000, "the table's rows (ids 0..rows-1), every one created before the steps");
DEFINE_int32(servers, 4, "parameter servers the rows are spread over");
DEFINE_int32(dimension, 16, "floats per row");
DEFINE_int32(batch, 512, "examples per step");
DEFINE_int32(features, 26, "ids per example, all in the one table");
DEFINE_double(zipf, 1.05, "exponent of the ids' Zipf distribution over the table");
DEFINE_int32(steps, 40, "measured steps");
DEFINE_int64(fill_ids, 65536, "ids per row pull while filling");
DEFINE_int64(dense_rows, 1000000, "rows of the dense variable the dense step is measured with");

namespace pstrain {
namespace {

using bench::Clock;
using wire::Message;
using wire::MessageType;
constexpr auto kTimeout = std::chrono::seconds(600);
const char* kTable = "T";

// A loopback port free now (a server binds it next).
int FreePort() {
  sockaddr_in addr{};
  const int fd = bench::BindLoopback(&addr);
  close(fd);
  return ntohs(addr.sin_port);
}

// CPU seconds (user + system) process `pid` has used.
double CpuSeconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(f)), {});
  std::istringstream rest(text.substr(text.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);
  }
  return ticks / sysconf(_SC_CLK_TCK);
}

double ResidentMiB(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024;
  }
  return 0;
}

// The servers: real processes of the pstrain binary, one table `T` updated by Adagrad, a dense
// variable of the same optimizer for the dense reference.
class Servers {
 public:
  Servers(const std::string& dir, int n) : dir_(dir) {
    std::filesystem::create_directories(dir);
    const std::string config = dir + "/tables.yaml";
    std::ofstream(config) << "model:\n  name: dense_reference\n  input: [4, 1, 1]\n  layers:\n"
                          << "    - {name: flat, type: flatten}\n"
                          << "    - {name: fc, type: fully_connected, units: 2}\n"
                          << "    - {name: loss, type: softmax_cross_entropy}\n"
                          << "train:\n  optimizer: {type: adagrad}\n"
                          << "  learning_rate: {schedule: constant, initial: 0.1}\n"
                          << "tables:\n  optimizer: {type: adagrad}\n"
                          << "  learning_rate: {schedule: constant, initial: 0.1}\n  list:\n"
                          << "    - {name: " << kTable << ", dimension: " << FLAGS_dimension
                          << ", max_rows: " << FLAGS_rows << "}\n";
    std::string hosts;
    std::vector<int> ports;
    for (int k = 0; k < n; ++k) {
      ports.push_back(FreePort());
      hosts += (k ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(ports.back());
    }
    for (int k = 0; k < n; ++k) {
      std::vector<std::string> args{FLAGS_pstrain,
                                    "--job_name=ps",
                                    "--task_index=" + std::to_string(k),
                                    "--ps_hosts=" + hosts,
                                    "--worker_hosts=127.0.0.1:1",
                                    "--config=" + config,
                                    "--train_dir=" + dir + "/ps" + std::to_string(k),
                                    "--save_checkpoints_secs=0"};
      const pid_t pid = fork();
      if (pid == 0) {
        FILE* log = std::fopen((dir + "/ps-" + std::to_string(k) + ".log").c_str(), "w");
        dup2(fileno(log), 1);
        dup2(fileno(log), 2);
        std::vector<char*> argv;
        for (std::string& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        execv(argv[0], argv.data());
        _exit(127);
      }
      pids_.push_back(pid);
      conns_.push_back(
          wire::Connection::Connect("tcp://127.0.0.1:" + std::to_string(ports[k])).value());
    }
  }
  ~Servers() {
    for (pid_t pid : pids_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }

  int size() const { return static_cast<int>(conns_.size()); }
  pid_t pid(int k) const { return pids_[k]; }
  double Cpu() const {
    double s = 0;
    for (pid_t pid : pids_) s += CpuSeconds(pid);
    return s;
  }

  // A request as worker 0's process sends it (pushes numbered per server).
  Message Request(MessageType type, int k) {
    Message m;
    m.type = type;
    m.role = "chief";
    m.task_index = 0;
    m.incarnation = wire::ProcessIncarnation();
    if (type == MessageType::kPush || type == MessageType::kRowPush) m.sequence = ++sequence_[k];
    return m;
  }
  // Sends each server's request (none where empty) and waits for every reply.
  std::vector<Message> Exchange(std::vector<std::optional<Message>> requests) {
    for (int k = 0; k < size(); ++k) {
      if (requests[k]) CHECK(conns_[k]->Send(*requests[k]).ok());
    }
    std::vector<Message> replies(size());
    for (int k = 0; k < size(); ++k) {
      if (!requests[k]) continue;
      Result<Message> r = conns_[k]->Receive(kTimeout);
      CHECK(r.ok()) << "ps " << k << ": " << r.status().ToString();
      CHECK(r->type == MessageType::kOk) << "ps " << k << ": " << r->text;
      replies[k] = std::move(r).value();
    }
    return replies;
  }
  // The chief's initialisation: the dense reference variable on server 0, a small one elsewhere.
  void Initialize(int64_t dense_rows) {
    std::vector<std::optional<Message>> init(size());
    for (int k = 0; k < size(); ++k) {
      init[k] = Request(MessageType::kRegister, k);
      init[k]->tensors.push_back({"fc/bias", Tensor::Filled(Shape{2}, 0.0f)});
    }
    init[0]->tensors.push_back(
        {"dense", Tensor::Filled(Shape{dense_rows, FLAGS_dimension}, 0.01f)});
    for (int attempt = 0;; ++attempt) {  // the servers may still be starting
      bool all = true;
      for (int k = 0; k < size(); ++k) {
        Result<Message> r = conns_[k]->Call(*init[k], std::chrono::seconds(2));
        all = all && r.ok() && r->type == MessageType::kOk;
      }
      if (all) return;
      CHECK_LT(attempt, 60) << "the servers did not start: see " << dir_;
    }
  }

 private:
  std::string dir_;
  std::vector<pid_t> pids_;
  std::vector<std::unique_ptr<wire::Connection>> conns_;
  std::map<int, uint64_t> sequence_;
};

// Row pulls of `ids` split by owner; their payload bytes (ids and rows) added to `bytes`.
std::vector<std::vector<int64_t>> ByOwner(const std::vector<int64_t>& ids, int servers) {
  std::vector<std::vector<int64_t>> by(servers);
  for (int64_t id : ids) by[RowOwner(kTable, id, servers)].push_back(id);
  return by;
}

int64_t PullRows(Servers& s, const std::vector<std::vector<int64_t>>& by_owner) {
  std::vector<std::optional<Message>> pulls(s.size());
  int64_t bytes = 0;
  for (int k = 0; k < s.size(); ++k) {
    if (by_owner[k].empty()) continue;
    pulls[k] = s.Request(MessageType::kRowPull, k);
    pulls[k]->text = kTable;
    pulls[k]->ids = by_owner[k];
    bytes += by_owner[k].size() * (sizeof(int64_t) + FLAGS_dimension * sizeof(float));
  }
  s.Exchange(std::move(pulls));
  return bytes;
}

int64_t PushRows(Servers& s, const std::vector<std::vector<int64_t>>& by_owner, int64_t step) {
  std::vector<std::optional<Message>> pushes(s.size());
  int64_t bytes = 0;
  for (int k = 0; k < s.size(); ++k) {
    if (by_owner[k].empty()) continue;
    const int64_t n = static_cast<int64_t>(by_owner[k].size());
    pushes[k] = s.Request(MessageType::kRowPush, k);
    pushes[k]->text = kTable;
    pushes[k]->step = step;
    pushes[k]->ids = by_owner[k];
    pushes[k]->tensors.push_back({kTable, Tensor::Filled(Shape{n, FLAGS_dimension}, 0.01f)});
    bytes += n * (sizeof(int64_t) + FLAGS_dimension * sizeof(float));
  }
  s.Exchange(std::move(pushes));
  return bytes;
}

// Ids 1..rows drawn with probability ~ 1/id^zipf (the continuous inverse CDF), as ids 0..rows-1.
class ZipfIds {
 public:
  ZipfIds(int64_t rows, double s, uint64_t seed) : rows_(rows), s_(s), rng_(seed) {}
  int64_t Next() {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng_);
    const double a = 1 - s_;
    const double x = std::pow((std::pow(static_cast<double>(rows_), a) - 1) * u + 1, 1 / a);
    return std::min<int64_t>(rows_ - 1, static_cast<int64_t>(x) - 1);
  }

 private:
  int64_t rows_;
  double s_;
  std::mt19937_64 rng_;
};

Status Main() {
  const std::string dir = std::filesystem::temp_directory_path().string() + "/pstrain-tables-" +
                          std::to_string(getpid());
  Servers servers(dir, FLAGS_servers);
  const int64_t dense_rows = std::min(FLAGS_dense_rows, FLAGS_rows);
  servers.Initialize(dense_rows);

  // Fill: every id once, each server's ids in pulls of --fill_ids, one per server at a time.
  const auto fill_start = Clock::now();
  std::vector<std::vector<int64_t>> pending(servers.size());
  for (int64_t id = 0; id < FLAGS_rows; ++id) {
    pending[RowOwner(kTable, id, servers.size())].push_back(id);
    const bool last = id + 1 == FLAGS_rows;
    bool full = false;
    for (const auto& p : pending) full = full || static_cast<int64_t>(p.size()) >= FLAGS_fill_ids;
    if (full || last) {
      PullRows(servers, pending);
      for (auto& p : pending) p.clear();
    }
  }
  const double fill_secs = bench::SecondsSince(fill_start);
  std::printf("rows %ld x %d floats over %d servers: filled in %.1f s (%.0f rows/s)\n",
              static_cast<long>(FLAGS_rows), FLAGS_dimension, servers.size(), fill_secs,
              FLAGS_rows / fill_secs);
  std::printf("resident memory per server, MiB:");
  for (int k = 0; k < servers.size(); ++k) std::printf(" %.0f", ResidentMiB(servers.pid(k)));
  std::printf("\n");

  // Sparse steps.
  ZipfIds zipf(FLAGS_rows, FLAGS_zipf, 17);
  int64_t bytes = 0, distinct = 0;
  const double cpu_before = servers.Cpu();
  const auto steps_start = Clock::now();
  for (int step = 0; step < FLAGS_steps; ++step) {
    std::unordered_set<int64_t> seen;
    std::vector<int64_t> ids;
    for (int i = 0; i < FLAGS_batch * FLAGS_features; ++i) {
      const int64_t id = zipf.Next();
      if (seen.insert(id).second) ids.push_back(id);
    }
    distinct += static_cast<int64_t>(ids.size());
    const auto by_owner = ByOwner(ids, servers.size());
    bytes += PullRows(servers, by_owner);
    bytes += PushRows(servers, by_owner, step);
  }
  const double sparse_cpu_ms = (servers.Cpu() - cpu_before) * 1e3 / FLAGS_steps;
  const double sparse_wall_ms = bench::SecondsSince(steps_start) * 1e3 / FLAGS_steps;
  const double sparse_bytes = static_cast<double>(bytes) / FLAGS_steps;
  std::printf(
      "sparse: %.0f distinct ids a step (of %d), %.2f MB a step, server CPU %.2f ms a step, "
      "%.2f ms a step end to end\n",
      static_cast<double>(distinct) / FLAGS_steps, FLAGS_batch * FLAGS_features, sparse_bytes / 1e6,
      sparse_cpu_ms, sparse_wall_ms);

  // Dense: the whole [dense_rows, D] variable pushed and pulled, Adagrad on every row.
  const int dense_steps = 5;
  Message pull = servers.Request(MessageType::kPull, 0);
  pull.names = {"dense"};
  std::vector<std::optional<Message>> first(servers.size());
  first[0] = pull;
  servers.Exchange(first);
  const double dense_cpu_before = CpuSeconds(servers.pid(0));
  for (int i = 0; i < dense_steps; ++i) {
    std::vector<std::optional<Message>> push(servers.size());
    push[0] = servers.Request(MessageType::kPush, 0);
    push[0]->step = i;
    push[0]->tensors.push_back(
        {"dense", Tensor::Filled(Shape{dense_rows, FLAGS_dimension}, 0.01f)});
    servers.Exchange(std::move(push));
    std::vector<std::optional<Message>> again(servers.size());
    again[0] = pull;
    servers.Exchange(std::move(again));
  }
  const double scale = static_cast<double>(FLAGS_rows) / dense_rows;
  const double dense_cpu_ms =
      (CpuSeconds(servers.pid(0)) - dense_cpu_before) * 1e3 / dense_steps * scale;
  const double dense_bytes = 2.0 * FLAGS_rows * FLAGS_dimension * sizeof(float);
  std::printf(
      "dense: %.2f MB a step, server CPU %.2f ms a step (measured at %ld rows, scaled x%.1f)\n",
      dense_bytes / 1e6, dense_cpu_ms, static_cast<long>(dense_rows), scale);
  std::printf("saved: bytes x%.0f, server CPU x%.0f\n", dense_bytes / sparse_bytes,
              dense_cpu_ms / sparse_cpu_ms);
  std::filesystem::remove_all(dir);
  return Status::OK();
}

}  // namespace
}  // namespace pstrain

PSTRAIN_TOOL_MAIN(
    "An embedding table over real servers: bytes and server CPU per step, "
    "sparse against dense.\nUsage: pstrain-bench-tables --rows=N",
    pstrain::Main);
