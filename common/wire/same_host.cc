#include "common/wire/same_host.h"

#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>

#include "common/wire/listen_address.h"
#include "common/wire/transport.h"

namespace pstrain {
namespace wire {
namespace {

// A directory only this user may enter: nobody else can place a socket in it or reach one there.
bool OwnPrivateDirectory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
         (st.st_mode & 077) == 0;
}

// ipc://<keys root>/<role>/<name> when every condition of same_host.h holds, else "".
std::string SocketBeside(const ClusterKeys& keys, const std::string& role, const char* name) {
  if (!keys.curve() || !keys.same_host_ipc) return "";
  std::error_code error;
  const std::filesystem::path own = std::filesystem::absolute(keys.dir, error);
  if (error) return "";
  const std::string dir = (own.lexically_normal().parent_path() / role).string();
  const std::string socket = dir + "/" + name;
  if (socket.size() >= sizeof(sockaddr_un{}.sun_path) || !OwnPrivateDirectory(dir)) return "";
  return "ipc://" + socket;
}

}  // namespace

std::string SameHostEndpoint(const ClusterKeys& keys, int ps_task) {
  if (ps_task < 0) return "";
  return SocketBeside(keys, "ps-" + std::to_string(ps_task), "ps.sock");
}

std::string SameHostHubEndpoint(const ClusterKeys& keys, int leader_task) {
  if (leader_task < 0) return "";
  return SocketBeside(keys, "worker-" + std::to_string(leader_task), "hub.sock");
}

Result<ServerRoute> RouteToServer(const ClusterKeys& keys, int ps_task,
                                  const std::string& host_port) {
  ServerRoute route;
  ASSIGN_OR_RETURN(route.security, keys.ForClientOf(ps_task));
  const size_t colon = host_port.rfind(':');
  const std::string host = colon == std::string::npos ? host_port : host_port.substr(0, colon);
  const std::string local = SameHostEndpoint(keys, ps_task);
  route.endpoint = !local.empty() && IsLoopbackHost(host) ? local : TcpEndpoint(host_port);
  return route;
}

}  // namespace wire
}  // namespace pstrain
