// A real parameter-server process started with --curve_keys (keys from WriteClusterKeys, as
// pstrain-keygen writes them): the cluster's worker pulls and pushes; a stray client without
// keys, or with keys of its own, can do neither; the server's log names every refused attempt.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/wire/curve.h"
#include "common/wire/transport.h"
#include "tests/distributed/curve_server_process.h"
#include "tests/test_env.h"

namespace pstrain {
namespace {

using std::chrono::milliseconds;
using wire::Message;
using wire::MessageType;

using testing::CurveServerProcess;
using testing::ReadFile;

std::unique_ptr<wire::Connection> ConnectOrDie(const std::string& endpoint,
                                               const wire::Security& security) {
  auto conn = wire::Connection::Connect(endpoint, {}, security);
  CHECK(conn.ok()) << conn.status().ToString();
  return std::move(conn).value();
}

// Retries while the process is still starting (Unavailable), as workers do.
Result<Message> CallWhenUp(wire::Connection* conn, Message m) {
  for (int i = 0;; ++i) {
    auto r = conn->Call(m, milliseconds(500));
    if (r.ok() || r.status().code() != StatusCode::kUnavailable || i > 40) return r;
  }
}

Message Register() {
  Message m;
  m.type = MessageType::kRegister;
  m.role = "chief";
  m.task_index = 0;
  m.incarnation = wire::ProcessIncarnation();
  m.tensors.push_back({"fc/weights", Tensor::Filled(Shape{2, 4}, 1.0f)});
  return m;
}

Message Pull() {
  Message m;
  m.type = MessageType::kPull;
  m.role = "worker";
  m.task_index = 0;
  m.incarnation = wire::ProcessIncarnation();
  m.names = {"fc/weights"};
  return m;
}

Message Push(float g) {
  Message m;
  m.type = MessageType::kPush;
  m.role = "worker";
  m.task_index = 1;
  m.incarnation = wire::ProcessIncarnation();
  m.sequence = 1;  // worker 1's first push
  m.tensors.push_back({"fc/weights", Tensor::Filled(Shape{2, 4}, g)});
  return m;
}

TEST(CurveProcessTest, OnlyTheClustersWorkersPullAndPushAndStraysAreLogged) {
  CurveServerProcess ps("serve");
  ps.Start(ps.keys() + "/ps-0");
  ASSERT_TRUE(ps.LogHas("CURVE authentication on")) << ReadFile(ps.log_path());

  Result<wire::ClusterKeys> worker = wire::LoadClusterKeys(ps.keys() + "/worker-0", "worker", 0);
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  auto chief = ConnectOrDie(ps.endpoint(), worker->ForClientOf(0).value());
  Result<Message> registered = CallWhenUp(chief.get(), Register());
  ASSERT_TRUE(registered.ok()) << registered.status().ToString();
  Result<Message> pulled = chief->Call(Pull(), milliseconds(5000));
  ASSERT_TRUE(pulled.ok()) << pulled.status().ToString();
  EXPECT_FLOAT_EQ(pulled->tensors.at(0).tensor[0], 1.0f);

  // No keys at all: neither pull nor push gets through.
  auto plain = ConnectOrDie(ps.endpoint(), wire::Security{});
  Result<Message> plain_push = plain->Call(Push(100.0f), milliseconds(5000));
  ASSERT_FALSE(plain_push.ok());
  EXPECT_NE(plain_push.status().message().find("authentication refused by " + ps.endpoint()),
            std::string::npos)
      << plain_push.status().message();
  EXPECT_FALSE(plain->Call(Pull(), milliseconds(2000)).ok());
  EXPECT_TRUE(ps.LogHas("handshake failed on tcp://0.0.0.0:")) << ReadFile(ps.log_path());

  // Keys of its own, trusting the right server key: the server does not know it.
  wire::Security stray;
  stray.own = wire::NewCurveKeyPair().value();
  stray.server_key = worker->ps_keys[0];
  auto intruder = ConnectOrDie(ps.endpoint(), stray);
  Result<Message> stray_push = intruder->Call(Push(100.0f), milliseconds(5000));
  ASSERT_FALSE(stray_push.ok());
  EXPECT_EQ(stray_push.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(stray_push.status().message().find("authentication refused by " + ps.endpoint()),
            std::string::npos)
      << stray_push.status().message();
  EXPECT_FALSE(intruder->Call(Pull(), milliseconds(2000)).ok());
  EXPECT_TRUE(ps.LogHas("authentication refused: a client from 127.0.0.1 on tcp://0.0.0.0:"))
      << ReadFile(ps.log_path());
  EXPECT_TRUE(ps.LogHas("unknown CURVE public key " + stray.own.public_key))
      << ReadFile(ps.log_path());

  // The server still serves its cluster, and no stray push changed the variable.
  ASSERT_TRUE(ps.Alive());
  pulled = chief->Call(Pull(), milliseconds(5000));
  ASSERT_TRUE(pulled.ok()) << pulled.status().ToString();
  EXPECT_FLOAT_EQ(pulled->tensors.at(0).tensor[0], 1.0f) << "a refused push changed a variable";
  Result<wire::ClusterKeys> worker1 = wire::LoadClusterKeys(ps.keys() + "/worker-1", "worker", 1);
  ASSERT_TRUE(worker1.ok()) << worker1.status().ToString();
  auto second = ConnectOrDie(ps.endpoint(), worker1->ForClientOf(0).value());
  ASSERT_TRUE(second->Call(Push(0.25f), milliseconds(5000)).ok());
  pulled = chief->Call(Pull(), milliseconds(5000));
  ASSERT_TRUE(pulled.ok()) << pulled.status().ToString();
  EXPECT_FLOAT_EQ(pulled->tensors.at(0).tensor[0], 0.75f);  // SGD, learning rate 1
}

TEST(CurveProcessTest, BadKeyDirectoryStopsTheServerAtStartNamingTheFile) {
  {
    CurveServerProcess ps("wrong_role");
    ps.Start(ps.keys() + "/worker-0");  // another role's directory: no ps-0 secret in it
    EXPECT_EQ(ps.Wait(), 2) << ReadFile(ps.log_path());
    EXPECT_NE(ReadFile(ps.log_path())
                  .find("--curve_keys: cannot read " + ps.keys() + "/worker-0/ps-0.key_secret"),
              std::string::npos)
        << ReadFile(ps.log_path());
  }
  {
    CurveServerProcess ps("open_secret");
    const std::string secret = ps.keys() + "/ps-0/ps-0.key_secret";
    chmod(secret.c_str(), 0644);
    ps.Start(ps.keys() + "/ps-0");
    EXPECT_EQ(ps.Wait(), 2) << ReadFile(ps.log_path());
    EXPECT_NE(ReadFile(ps.log_path())
                  .find(secret + " holds a secret key but group or others may "
                                 "read it (mode 0644)"),
              std::string::npos)
        << ReadFile(ps.log_path());
  }
}

}  // namespace
}  // namespace pstrain
