// The process's count of what it read from each Unix socket it accepted: exact over recv(),
// from zero at each accept, peeks left out, and nothing for a descriptor no accept returned.
#include "common/wire/unix_read_count.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace pstrain {
namespace wire {
namespace {

class UnixPair {
 public:
  UnixPair() {
    path_ = ::testing::TempDir() + "/read_count_" + std::to_string(getpid()) + ".sock";
    unlink(path_.c_str());
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path_.c_str(), sizeof(address.sun_path) - 1);
    listener_ = socket(AF_UNIX, SOCK_STREAM, 0);
    const auto* any = reinterpret_cast<const sockaddr*>(&address);
    EXPECT_EQ(bind(listener_, any, sizeof(address)), 0);
    EXPECT_EQ(listen(listener_, 4), 0);
    client_ = socket(AF_UNIX, SOCK_STREAM, 0);
    EXPECT_EQ(connect(client_, any, sizeof(address)), 0);
    server_ = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    EXPECT_GE(server_, 0);
  }
  ~UnixPair() {
    close(client_);
    close(server_);
    close(listener_);
    unlink(path_.c_str());
  }
  int client() const { return client_; }
  int server() const { return server_; }

 private:
  std::string path_;
  int listener_ = -1, client_ = -1, server_ = -1;
};

TEST(UnixReadCountTest, CountsWhatRecvReadSinceAcceptAndNoPeek) {
  UnixPair pair;
  EXPECT_EQ(UnixBytesRead(pair.server()), 0u) << "an accepted descriptor starts at zero";
  const std::string sent(10000, 'x');
  ASSERT_EQ(send(pair.client(), sent.data(), sent.size(), 0), 10000);
  char buffer[4096];
  ASSERT_EQ(recv(pair.server(), buffer, 100, MSG_PEEK), 100);
  EXPECT_EQ(UnixBytesRead(pair.server()), 0u) << "a peek reads nothing away";
  size_t got = 0;
  while (got < sent.size()) {
    const ssize_t n = recv(pair.server(), buffer, sizeof(buffer), 0);
    ASSERT_GT(n, 0);
    got += static_cast<size_t>(n);
  }
  EXPECT_EQ(UnixBytesRead(pair.server()), 10000u);
}

TEST(UnixReadCountTest, ADescriptorNoAcceptReturnedHasNoCount) {
  UnixPair pair;
  EXPECT_FALSE(UnixBytesRead(pair.client()).has_value()) << "connected, not accepted";
  EXPECT_FALSE(UnixBytesRead(-1).has_value());
  EXPECT_FALSE(UnixBytesRead(1 << 20).has_value());
}

TEST(UnixReadCountTest, ADescriptorAcceptedAgainStartsFromZero) {
  int reused = -1;
  {
    UnixPair first;
    const std::string sent(500, 'y');
    ASSERT_EQ(send(first.client(), sent.data(), sent.size(), 0), 500);
    char buffer[1024];
    ASSERT_EQ(recv(first.server(), buffer, sizeof(buffer), 0), 500);
    EXPECT_EQ(UnixBytesRead(first.server()), 500u);
    reused = first.server();
  }
  UnixPair second;  // the lowest free descriptors again
  ASSERT_EQ(second.server(), reused) << "the same descriptor, accepted again";
  ASSERT_TRUE(UnixBytesRead(second.server()).has_value());
  EXPECT_EQ(UnixBytesRead(second.server()), 0u) << "the first connection's count carried over";
}

}  // namespace
}  // namespace wire
}  // namespace pstrain
