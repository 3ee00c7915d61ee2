#include "common/wire/zap_handler.h"

#include <glog/logging.h>
#include <netdb.h>
#include <sys/socket.h>
#include <zmq.h>

#include <atomic>
#include <cerrno>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "common/wire/refusal_log.h"
#include "common/wire/same_host_proof.h"
#include "common/wire/z85.h"
#include "common/wire/zmq_context.h"

namespace pstrain {
namespace wire {

struct ZapDomainState {
  std::string name;
  ZapDomain::Proof proof = ZapDomain::Proof::kCurve;
  std::map<std::string, std::string> clients;  // 32-byte binary public key -> name
  std::string server_secret;                   // Z85; kSameHostProof only
  std::mutex mu;
  std::string endpoint;  // guarded by mu
  // Peer address -> the key names let in from it (guarded by mu). Only keys of the cluster get
  // here; addresses beyond kMaxAddresses clear it, as RefusalLog does.
  std::map<std::string, std::set<std::string>> admitted;
  std::atomic<int64_t> refused{0};
};

namespace {

constexpr size_t kMaxAddresses = 4096;

// ZeroMQ's fixed address for the handler (RFC 27).
constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";

struct Registry {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<ZapDomainState>> domains;
  int64_t next_id = 0;
};

Registry& Domains() {
  static auto* registry = new Registry;  // never destroyed: the handler thread outlives statics
  return *registry;
}

std::string Z85(const std::string& binary_key) {
  return Z85Of32(binary_key).value_or("(" + std::to_string(binary_key.size()) + "-byte key)");
}

// Reads every frame of the next request; false if the context is going away.
bool ReceiveRequest(void* socket, std::vector<std::string>* frames) {
  frames->clear();
  for (bool more = true; more;) {
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, socket, 0) < 0) {
      zmq_msg_close(&msg);
      if (zmq_errno() == EINTR && frames->empty()) continue;
      return false;
    }
    frames->emplace_back(static_cast<const char*>(zmq_msg_data(&msg)), zmq_msg_size(&msg));
    more = zmq_msg_more(&msg) != 0;
    zmq_msg_close(&msg);
  }
  return true;
}

// The registered client named `name` whose same-host proof (same_host_proof.h) is `proof`, or
// clients.end().
std::map<std::string, std::string>::const_iterator ProvedClient(const ZapDomainState& state,
                                                                const std::string& name,
                                                                const std::string& proof) {
  for (auto it = state.clients.begin(); it != state.clients.end(); ++it) {
    if (it->second != name) continue;
    auto expected = SameHostProof(state.server_secret, Z85(it->first), name);
    return expected.ok() && SameProof(*expected, proof) ? it : state.clients.end();
  }
  return state.clients.end();
}

// RFC 27 request: version, request id, domain, address, routing id, mechanism, credentials...
// Reply: version, request id, status code, status text, user id, metadata.
std::vector<std::string> Answer(const std::vector<std::string>& request) {
  const std::string id = request.size() > 1 ? request[1] : "";
  auto reply = [&id](const char* code, const std::string& text, const std::string& user = "") {
    return std::vector<std::string>{"1.0", id, code, text, user, ""};
  };
  if (request.size() < 6 || request[0] != "1.0") return reply("500", "malformed ZAP request");
  const std::string& domain = request[2];
  const std::string& address = request[3];
  std::shared_ptr<ZapDomainState> state;
  {
    std::lock_guard<std::mutex> lock(Domains().mu);
    auto it = Domains().domains.find(domain);
    if (it != Domains().domains.end()) state = it->second;
  }
  if (state == nullptr) {
    // A socket closed while a client was connecting, or a CURVE socket not made by transport.cc.
    PSTRAIN_REFUSAL_WARNING("zap-domain:" + domain,
                            "refused a CURVE client from " + address +
                                ": no pstrain server socket has ZAP domain '" + domain + "'");
    return reply("400", "no such server");
  }
  std::string endpoint;
  {
    std::lock_guard<std::mutex> lock(state->mu);
    endpoint = state->endpoint;
  }
  const char* mechanism = state->proof == ZapDomain::Proof::kCurve ? "CURVE" : "PLAIN";
  if (request[5] != mechanism || request.size() < (request[5] == "PLAIN" ? 8u : 7u)) {
    state->refused.fetch_add(1);
    PSTRAIN_REFUSAL_WARNING("zap-mechanism:" + domain + address,
                            "refused a client from " + address + " on " + endpoint +
                                ": it uses the " + request[5] + " mechanism, not " + mechanism);
    return reply("400", std::string(mechanism) + " required");
  }
  const bool same_host = state->proof == ZapDomain::Proof::kSameHostProof;
  auto client =
      same_host ? ProvedClient(*state, request[6], request[7]) : state->clients.find(request[6]);
  if (client == state->clients.end()) {
    state->refused.fetch_add(1);
    const std::string what =
        same_host ? "no valid same-host proof for the key '" + request[6].substr(0, 64) + "'"
                  : "an unknown CURVE public key " + Z85(request[6]);
    PSTRAIN_REFUSAL_WARNING(
        "zap-key:" + domain + address + request[6],
        "authentication refused: a client from " + address + " on " + endpoint + " has " + what +
            " (not one of the " + std::to_string(state->clients.size()) +
            " this server lets in; a stray process, or keys from another cluster?)");
    return reply("400", "unknown key");
  }
  {
    std::lock_guard<std::mutex> lock(state->mu);
    if (state->admitted.size() >= kMaxAddresses && state->admitted.count(address) == 0) {
      state->admitted.clear();
    }
    state->admitted[address].insert(client->second);
  }
  // As sshd logs each accepted login: which key came in, from where, and on which socket.
  LOG(INFO) << "accepted " << client->second << " from "
            << (address.empty() ? "this host" : address) << " on " << endpoint
            << (state->proof == ZapDomain::Proof::kCurve ? " (CURVE)" : " (key proved, same host)");
  return reply("200", "OK", client->second);
}

void Serve(void* socket) {
  std::vector<std::string> request;
  while (ReceiveRequest(socket, &request)) {
    const std::vector<std::string> reply = Answer(request);
    for (size_t i = 0; i < reply.size(); ++i) {
      const int flags = i + 1 < reply.size() ? ZMQ_SNDMORE : 0;
      if (zmq_send(socket, reply[i].data(), reply[i].size(), flags) < 0) {
        LOG(ERROR) << "ZAP handler: cannot reply: " << zmq_strerror(zmq_errno());
        break;
      }
    }
  }
  LOG(WARNING) << "ZAP handler stopped: " << zmq_strerror(zmq_errno());
  zmq_close(socket);
}

// Binds the handler's socket in the calling thread (so that it is there when this returns),
// then serves it from a thread that lives as long as the process.
Status StartHandler() {
  static const Status started = [] {
    void* socket = zmq_socket(ZmqContext(), ZMQ_REP);
    if (socket == nullptr) {
      return Unavailable(std::string("ZAP handler: zmq_socket: ") + zmq_strerror(zmq_errno()));
    }
    if (zmq_bind(socket, kZapEndpoint) != 0) {
      Status error = Unavailable(std::string("ZAP handler: cannot bind ") + kZapEndpoint + ": " +
                                 zmq_strerror(zmq_errno()));
      zmq_close(socket);
      return error;
    }
    std::thread(Serve, socket).detach();
    return Status::OK();
  }();
  return started;
}

}  // namespace

Result<std::unique_ptr<ZapDomain>> ZapDomain::Register(
    const std::map<std::string, std::string>& client_keys, Proof proof,
    const std::string& server_secret) {
  if (proof == Proof::kSameHostProof && server_secret.size() != 40) {
    return InvalidArgument("a same-host server needs its own secret key to check proofs");
  }
  RETURN_IF_ERROR(StartHandler());
  auto state = std::make_shared<ZapDomainState>();
  state->proof = proof;
  state->server_secret = server_secret;
  for (const auto& [z85, name] : client_keys) {
    std::optional<std::string> binary = BytesOfZ85Key(z85);
    if (!binary) {
      return InvalidArgument("the public key of " + name + " is not a CURVE key (expected 40 " +
                             "Z85 characters, got '" + z85 + "')");
    }
    state->clients[*binary] = name;
  }
  std::lock_guard<std::mutex> lock(Domains().mu);
  state->name = "pstrain-" + std::to_string(Domains().next_id++);
  Domains().domains[state->name] = state;
  return std::unique_ptr<ZapDomain>(new ZapDomain(std::move(state)));
}

ZapDomain::ZapDomain(std::shared_ptr<ZapDomainState> state) : state_(std::move(state)) {}

ZapDomain::~ZapDomain() {
  std::lock_guard<std::mutex> lock(Domains().mu);
  Domains().domains.erase(state_->name);
}

const std::string& ZapDomain::name() const { return state_->name; }

void ZapDomain::set_endpoint(const std::string& endpoint) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->endpoint = endpoint;
}

int64_t ZapDomain::refused() const { return state_->refused.load(); }

std::vector<std::string> ZapDomain::AdmittedFrom(const std::string& address) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->admitted.find(address);
  if (it == state_->admitted.end()) return {};
  return {it->second.begin(), it->second.end()};
}

// As ZeroMQ's stream engine names its peer: numeric host, and a Unix peer's credentials.
std::string ZapDomain::AddressOf(int fd) {
  sockaddr_storage peer{};
  socklen_t size = sizeof(peer);
  char host[NI_MAXHOST] = {0};
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &size) != 0 ||
      getnameinfo(reinterpret_cast<sockaddr*>(&peer), size, host, sizeof(host), nullptr, 0,
                  NI_NUMERICHOST) != 0) {
    return "";
  }
  std::string address = host;
  ucred credentials{};
  socklen_t credentials_size = sizeof(credentials);
  if (peer.ss_family == AF_UNIX &&
      getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &credentials_size) == 0) {
    address += ":" + std::to_string(credentials.uid) + ":" + std::to_string(credentials.gid) + ":" +
               std::to_string(credentials.pid);
  }
  return address;
}

}  // namespace wire
}  // namespace pstrain
