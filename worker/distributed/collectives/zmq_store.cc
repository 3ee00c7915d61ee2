#include "worker/distributed/collectives/zmq_store.h"

#include <glog/logging.h>

#include <thread>

namespace pstrain {

using std::chrono::milliseconds;
using wire::Message;
using wire::MessageType;

namespace {

// Values (an NCCL unique id is 128 arbitrary bytes) travel hex-encoded in the text field.
std::string ToHex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  return hex;
}

Result<std::string> FromHex(const std::string& hex) {
  auto nibble = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  if (hex.size() % 2 != 0)
    return DataLoss("store value of odd hex length " + std::to_string(hex.size()));
  std::string bytes(hex.size() / 2, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return DataLoss("store value is not lowercase hex at byte " + std::to_string(i));
    bytes[i] = static_cast<char>(hi << 4 | lo);
  }
  return bytes;
}

}  // namespace

Result<std::unique_ptr<ZmqStore>> ZmqStore::Connect(const std::string& endpoint, int rank,
                                                    const wire::Security& security,
                                                    milliseconds set_timeout) {
  auto store = std::unique_ptr<ZmqStore>(new ZmqStore());
  ASSIGN_OR_RETURN(store->connection_, wire::Connection::Connect(endpoint, {}, security));
  store->endpoint_ = endpoint;
  store->rank_ = rank;
  store->set_timeout_ = set_timeout;
  return store;
}

Status ZmqStore::Set(const std::string& key, const std::string& value) {
  Message m;
  m.type = MessageType::kStoreSet;
  m.task_index = rank_;
  m.role = "rank";
  m.names = {key};
  m.text = ToHex(value);
  // The server may not be up yet (ranks start in any order): ZeroMQ connects in the background
  // and delivers the request once it is.
  Result<Message> r = connection_->Call(m, set_timeout_);
  return r.status().WithContext("rank " + std::to_string(rank_) + " setting store key '" + key +
                                "' on " + endpoint_);
}

Result<std::string> ZmqStore::Get(const std::string& key, milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Message m;
  m.type = MessageType::kStoreGet;
  m.task_index = rank_;
  m.role = "rank";
  m.names = {key};
  milliseconds backoff(10);
  while (true) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    Result<Message> r = connection_->Call(m, left);
    if (r.ok() && r->value == 1) return FromHex(r->text);
    if (!r.ok() && r.status().code() != StatusCode::kUnavailable) {
      return r.status().WithContext("rank " + std::to_string(rank_) + " getting store key '" + key +
                                    "' from " + endpoint_);
    }
    std::this_thread::sleep_for(std::min(backoff, left));
    backoff = std::min(backoff * 2, milliseconds(200));
  }
  return Unavailable("rank " + std::to_string(rank_) + " timed out after " +
                     std::to_string(timeout.count()) + " ms waiting for store key '" + key +
                     "' on " + endpoint_ + " (is the host's leader, local rank 0, up?)");
}

Status ZmqStore::Wait(const std::vector<std::string>& keys, milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const std::string& key : keys) {
    const auto left = std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(
                                                    deadline - std::chrono::steady_clock::now()));
    RETURN_IF_ERROR(Get(key, left).status());
  }
  return Status::OK();
}

}  // namespace pstrain
