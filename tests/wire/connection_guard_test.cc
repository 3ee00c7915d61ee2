// The connection guard: its framing sizes against what the kernel counts on real loopback TCP
// (exact, or what it thinks a connection holds would drift over a long run), its bounds on
// counters it is given, and a server socket cutting a peer that sends more of one message
// than a message may be while serving the others.
#include "common/wire/connection_guard.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zmq.h>

#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/wire/request.h"
#include "common/wire/transport.h"
#include "common/wire/zmq_context.h"

namespace pstrain {
namespace wire {
namespace {

using std::chrono::milliseconds;

// A raw ROUTER and DEALER on loopback TCP, with CURVE or without.
class RawPair {
 public:
  explicit RawPair(bool curve) {
    router_ = zmq_socket(ZmqContext(), ZMQ_ROUTER);
    dealer_ = zmq_socket(ZmqContext(), ZMQ_DEALER);
    if (curve) {
      char server_public[41], server_secret[41], client_public[41], client_secret[41];
      zmq_curve_keypair(server_public, server_secret);
      zmq_curve_keypair(client_public, client_secret);
      const int one = 1;
      zmq_setsockopt(router_, ZMQ_CURVE_SERVER, &one, sizeof(one));
      zmq_setsockopt(router_, ZMQ_CURVE_SECRETKEY, server_secret, 40);
      zmq_setsockopt(dealer_, ZMQ_CURVE_SERVERKEY, server_public, 40);
      zmq_setsockopt(dealer_, ZMQ_CURVE_PUBLICKEY, client_public, 40);
      zmq_setsockopt(dealer_, ZMQ_CURVE_SECRETKEY, client_secret, 40);
    }
    const int linger = 0;
    zmq_setsockopt(router_, ZMQ_LINGER, &linger, sizeof(linger));
    zmq_setsockopt(dealer_, ZMQ_LINGER, &linger, sizeof(linger));
    CHECK_EQ(zmq_bind(router_, "tcp://127.0.0.1:0"), 0);
    char endpoint[256];
    size_t size = sizeof(endpoint);
    zmq_getsockopt(router_, ZMQ_LAST_ENDPOINT, endpoint, &size);
    CHECK_EQ(zmq_connect(dealer_, endpoint), 0);
  }
  ~RawPair() {
    zmq_close(dealer_);
    zmq_close(router_);
  }
  void Send(const std::vector<size_t>& frame_sizes) {
    for (size_t i = 0; i < frame_sizes.size(); ++i) {
      const std::string frame(frame_sizes[i], 'x');
      zmq_send(dealer_, frame.data(), frame.size(), i + 1 < frame_sizes.size() ? ZMQ_SNDMORE : 0);
    }
  }
  // Receives one message; its descriptor, and its frames' sizes as the guard frames them.
  int Receive(bool curve, uint64_t* wire_bytes) {
    int fd = -1;
    for (bool first = true, more = true; more; first = false) {
      zmq_msg_t msg;
      zmq_msg_init(&msg);
      CHECK_GE(zmq_msg_recv(&msg, router_, 0), 0);
      more = zmq_msg_more(&msg) != 0;
      if (!first) *wire_bytes += ConnectionGuard::WireBytes(zmq_msg_size(&msg), curve);
      fd = zmq_msg_get(&msg, ZMQ_SRCFD);
      zmq_msg_close(&msg);
    }
    return fd;
  }

 private:
  void* router_;
  void* dealer_;
};

TEST(ConnectionGuardTest, WireBytesAreWhatTheKernelCountsForEveryFrameSize) {
  for (bool curve : {false, true}) {
    RawPair pair(curve);
    // Around both one-byte and eight-byte sizes, with and without CURVE's 33 bytes.
    const std::vector<size_t> sizes = {0,   1,   33,  222,  223,   253,
                                       254, 255, 256, 1000, 70000, 3 << 20};
    uint64_t delivered = 0;
    int64_t handshake = -1;
    for (int round = 0; round < 3; ++round) {
      for (size_t i = 0; i < sizes.size(); ++i) {
        pair.Send({sizes[i], sizes[(i + 5) % sizes.size()], sizes[(i + 7) % sizes.size()]});
        const int fd = pair.Receive(curve, &delivered);
        const std::optional<uint64_t> read = ConnectionGuard::KernelBytesRead(fd);
        ASSERT_TRUE(read.has_value());
        const int64_t rest = static_cast<int64_t>(*read) - static_cast<int64_t>(delivered);
        if (handshake < 0) handshake = rest;  // the greeting and handshake, before any message
        EXPECT_EQ(rest, handshake) << (curve ? "CURVE" : "plaintext") << ": frame sizes from "
                                   << sizes[i] << ", round " << round;
      }
    }
    EXPECT_GT(handshake, 0);
    EXPECT_LT(handshake, 4096) << "the handshake must fit the guard's slack";
  }
}

// Counters the test sets: bytes read per descriptor.
struct FakeKernel {
  std::map<int, uint64_t> read;
  ConnectionGuard::BytesRead Reader() {
    return [this](int fd) -> std::optional<uint64_t> {
      auto it = read.find(fd);
      if (it == read.end()) return std::nullopt;
      return it->second;
    };
  }
};

MessageLimits OneMiB() {
  MessageLimits limits;
  limits.max_total_bytes = 1 << 20;
  limits.max_frames = 16;
  return limits;
}

TEST(ConnectionGuardTest, ConnectionOverOneMessageIsReportedOnceWhenNothingFinishedWaits) {
  FakeKernel kernel;
  ConnectionGuard guard(OneMiB(), 8, Link::kCurve, kernel.Reader());
  const auto drained = [] { return true; };
  EXPECT_GT(guard.unfinished_bound(), uint64_t{1} << 20);
  EXPECT_LT(guard.unfinished_bound(), (uint64_t{1} << 20) + (128 << 10));
  guard.Opened(7);
  guard.Opened(8);
  kernel.read[7] = guard.unfinished_bound();  // exactly at the bound: kept
  kernel.read[8] = 5 << 20;
  guard.Delivered(8, 5 << 20, "worker-0");  // all delivered: holds nothing
  EXPECT_TRUE(guard.Check(drained).empty());
  kernel.read[7] += 1;
  const std::vector<OverfullConnection> over = guard.Check(drained);
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].fd, 7);
  EXPECT_EQ(over[0].held_bytes, guard.unfinished_bound() + 1);
  EXPECT_EQ(over[0].bound_bytes, guard.unfinished_bound());
  EXPECT_EQ(over[0].identity, "");
  kernel.read[7] += 1 << 20;
  EXPECT_TRUE(guard.Check(drained).empty()) << "reported once, until it closes";
}

TEST(ConnectionGuardTest, WhileFinishedMessagesWaitAFullQueueOfThemIsTheBound) {
  FakeKernel kernel;
  ConnectionGuard guard(OneMiB(), 8, Link::kPlaintext, kernel.Reader());
  bool drained = false;
  guard.Opened(3);
  guard.Delivered(3, 100, "worker-1");
  kernel.read[3] = 100 + 4 * guard.unfinished_bound();  // four whole messages wait
  EXPECT_TRUE(guard.Check([&] { return drained; }).empty());
  kernel.read[3] = 100 + guard.queued_bound() + 1;
  std::vector<OverfullConnection> over = guard.Check([&] { return drained; });
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].identity, "worker-1");
  EXPECT_EQ(over[0].bound_bytes, guard.queued_bound());
  EXPECT_GE(guard.queued_bound(), uint64_t{9} << 20);
}

TEST(ConnectionGuardTest, OverOneMessageWhileTwoRoundsOfOthersAreDeliveredIsReported) {
  FakeKernel kernel;
  ConnectionGuard guard(OneMiB(), 8, Link::kCurve, kernel.Reader());
  const auto busy = [] { return false; };  // finished messages always wait
  for (int fd : {3, 4, 5}) guard.Opened(fd);
  kernel.read[3] = 2 * guard.unfinished_bound();  // a finished message may wait behind it
  kernel.read[4] = kernel.read[5] = 1000;
  EXPECT_TRUE(guard.Check(busy).empty());
  // Two rounds of the others' messages (2 x 3 connections + 2), but one came from 3 itself:
  // its finished one was taken, so it is watched from here.
  for (int i = 0; i < 7; ++i) guard.Delivered(4 + i % 2, 100, "");
  guard.Delivered(3, 100, "worker-2");
  kernel.read[3] += 100;
  EXPECT_TRUE(guard.Check(busy).empty());
  for (int i = 0; i < 7; ++i) guard.Delivered(4 + i % 2, 100, "");
  EXPECT_TRUE(guard.Check(busy).empty()) << "one delivery short of two rounds";
  guard.Delivered(5, 100, "");
  const std::vector<OverfullConnection> over = guard.Check(busy);
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].fd, 3);
  EXPECT_EQ(over[0].identity, "worker-2");
  EXPECT_EQ(over[0].bound_bytes, guard.unfinished_bound());
}

TEST(ConnectionGuardTest, AClosedDescriptorIsForgottenAndAReusedOneStartsAfresh) {
  FakeKernel kernel;
  ConnectionGuard guard(OneMiB(), 8, Link::kCurve, kernel.Reader());
  const auto drained = [] { return true; };
  guard.Opened(5);
  guard.Delivered(5, 50 << 20, "worker-1");
  guard.Closed(5);
  EXPECT_EQ(guard.connections(), 0u);
  guard.Delivered(5, 50 << 20, "worker-1");  // late messages of the closed one: no entry
  EXPECT_EQ(guard.connections(), 0u);
  guard.Opened(5);  // a new connection on the same number counts from nothing
  kernel.read[5] = 2 << 20;
  ASSERT_EQ(guard.Check(drained).size(), 1u);
  guard.Opened(9);
  EXPECT_TRUE(guard.Check(drained).empty()) << "no counter for 9: nothing to judge";
}

TEST(ConnectionGuardTest, AServersKeyMayHoldACopyAndAnyOtherKeyOnlyItsRolesMessage) {
  FakeKernel kernel;
  ConnectionGuard guard(OneMiB(), 8, Link::kCurve, kernel.Reader());
  guard.SetMessageBounds(64 << 10, 512 << 10);
  EXPECT_LT(guard.unfinished_bound(PeerKind::kClient), guard.unfinished_bound(PeerKind::kServer));
  EXPECT_GT(guard.unfinished_bound(PeerKind::kServer), uint64_t{512} << 10);
  const auto drained = [] { return true; };
  for (int fd : {3, 4}) guard.Opened(fd);
  guard.Delivered(3, 100, "ps-1");
  guard.Delivered(4, 100, "worker-1");
  // Each now holds more than a client may and less than a server may.
  kernel.read[3] = kernel.read[4] = 100 + guard.unfinished_bound(PeerKind::kClient) + 1;
  const std::vector<OverfullConnection> over = guard.Check(drained);
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].identity, "worker-1");
  EXPECT_EQ(over[0].bound_bytes, guard.unfinished_bound(PeerKind::kClient));
  kernel.read[3] = 100 + guard.unfinished_bound(PeerKind::kServer) + 1;
  ASSERT_EQ(guard.Check(drained).size(), 1u) << "a server's key is bounded too";
}

TEST(ConnectionGuardTest,
     BeforeItsFirstMessageAConnectionIsAClientsUnlessAServerKeyCameFromItsHost) {
  FakeKernel kernel;
  std::map<int, bool> from_server_host = {{3, true}, {4, false}};
  ConnectionGuard guard(OneMiB(), 8, Link::kCurve, kernel.Reader(),
                        [&](int fd) { return from_server_host[fd]; });
  guard.SetMessageBounds(64 << 10, 512 << 10);
  const auto drained = [] { return true; };
  for (int fd : {3, 4}) guard.Opened(fd);
  kernel.read[3] = kernel.read[4] = guard.unfinished_bound(PeerKind::kClient) + 1;
  std::vector<OverfullConnection> over = guard.Check(drained);
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].fd, 4);
  EXPECT_EQ(over[0].bound_bytes, guard.unfinished_bound(PeerKind::kClient));
  // The same host, but its first message named a worker's key: a client's bound from then on.
  guard.Opened(5);
  from_server_host[5] = true;
  guard.Delivered(5, 100, "worker-0");
  kernel.read[5] = 100 + guard.unfinished_bound(PeerKind::kClient) + 1;
  over = guard.Check(drained);
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].fd, 5);
  kernel.read[3] = guard.unfinished_bound(PeerKind::kServer) + 1;
  over = guard.Check(drained);
  ASSERT_EQ(over.size(), 1u) << "a server's bound is a bound";
  EXPECT_EQ(over[0].fd, 3);
}

TEST(ConnectionGuardTest, InPlaintextNoKeyNamesAPeerSoEveryConnectionGetsAServersBound) {
  FakeKernel kernel;
  ConnectionGuard guard(OneMiB(), 8, Link::kPlaintext, kernel.Reader());
  guard.SetMessageBounds(64 << 10, 512 << 10);
  const auto drained = [] { return true; };
  guard.Opened(3);
  kernel.read[3] = guard.unfinished_bound(PeerKind::kServer);
  EXPECT_TRUE(guard.Check(drained).empty());
  kernel.read[3] += 1;
  const std::vector<OverfullConnection> over = guard.Check(drained);
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].bound_bytes, guard.unfinished_bound(PeerKind::kServer));
}

TEST(ConnectionGuardTest, BoundsAboveTheLimitsAreTheLimits) {
  FakeKernel kernel;
  ConnectionGuard guard(OneMiB(), 8, Link::kCurve, kernel.Reader());
  const uint64_t limit = guard.unfinished_bound(PeerKind::kServer);
  EXPECT_EQ(guard.unfinished_bound(PeerKind::kClient), limit) << "none set: the limits'";
  guard.SetMessageBounds(64 << 20, 64 << 20);
  EXPECT_EQ(guard.unfinished_bound(PeerKind::kClient), limit);
  EXPECT_EQ(guard.unfinished_bound(PeerKind::kServer), limit);
}

// A server socket bound at `endpoint` cuts a peer that sends it 256 MiB of one message, and
// serves the others on; the cut names the peer as `peer_prefix`...
void ExpectCutWhileOthersServed(const std::string& endpoint, const std::string& peer_prefix) {
  MessageLimits limits = OneMiB();
  limits.max_header_bytes = 1 << 20;
  limits.max_tensor_bytes = 1 << 20;
  auto server = ServerSocket::Bind(endpoint, limits);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  void* peer = zmq_socket(ZmqContext(), ZMQ_DEALER);
  const int linger = 0;
  zmq_setsockopt(peer, ZMQ_LINGER, &linger, sizeof(linger));
  zmq_socket_monitor(peer, "inproc://guard-test-peer", ZMQ_EVENT_DISCONNECTED);
  void* events = zmq_socket(ZmqContext(), ZMQ_PAIR);
  zmq_connect(events, "inproc://guard-test-peer");
  ASSERT_EQ(zmq_connect(peer, (*server)->endpoint().c_str()), 0);
  // 256 MiB in frames of 64 KiB: ZeroMQ sends them once it has the last, and the server sees
  // the message unfinished while they arrive.
  static const std::string frame(64 << 10, 'x');
  for (int i = 0; i < 4096; ++i) {
    zmq_send_const(peer, frame.data(), frame.size(), i + 1 < 4096 ? ZMQ_SNDMORE : 0);
  }
  std::vector<CutConnection> cut;
  zmq_pollitem_t disconnected{events, 0, ZMQ_POLLIN, 0};
  for (int i = 0; i < 1000 && cut.empty(); ++i) {
    std::this_thread::sleep_until((*server)->next_guard());
    cut = (*server)->GuardConnections();
  }
  ASSERT_EQ(cut.size(), 1u) << "the peer was not cut";
  EXPECT_EQ(cut[0].endpoint, (*server)->endpoint());
  EXPECT_EQ(cut[0].peer.rfind(peer_prefix, 0), 0u) << cut[0].peer;
  EXPECT_GT(cut[0].held_bytes, cut[0].bound_bytes);
  EXPECT_EQ(cut[0].bound_bytes, ConnectionGuard(limits, 8, Link::kPlaintext).unfinished_bound())
      << "cut as a message unfinished, with no finished one waiting";
  EXPECT_EQ(zmq_poll(&disconnected, 1, 5000), 1) << "the peer still has its connection";
  zmq_socket_monitor(peer, nullptr, 0);
  zmq_close(events);
  zmq_close(peer);
  // The others are served on.
  auto other = Connection::Connect((*server)->endpoint(), limits);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->Send(Request(MessageType::kHeartbeat, "worker", 0, 1)).ok());
  Result<Incoming> in = (*server)->Receive(milliseconds(5000));
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_TRUE(in->message.ok()) << in->message.status().ToString();
}

TEST(ConnectionGuardTest, ServerCutsAPeerSendingMoreOfOneMessageThanAMessageMayBe) {
  ExpectCutWhileOthersServed("tcp://127.0.0.1:0", "127.0.0.1:");
}

// The kernel counts no bytes of a Unix connection; the process's own count (unix_read_count.h)
// stands in for it, so a same-host peer is cut as a TCP one is, named by its process.
TEST(ConnectionGuardTest, ServerCutsASameHostPeerSendingMoreOfOneMessageThanAMessageMayBe) {
  const std::string dir = ::testing::TempDir() + "/guard_ipc_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ExpectCutWhileOthersServed("ipc://" + dir + "/ps.sock", "localhost:" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace wire
}  // namespace pstrain
