#include "common/wire/curve.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/wire/z85.h"

namespace pstrain {
namespace wire {
namespace {

namespace fs = std::filesystem;

constexpr size_t kZ85KeyLength = 40;
constexpr const char* kSecretSuffix = "_secret";

bool IsZ85Key(const std::string& key) { return BytesOfZ85Key(key).has_value(); }

std::string Certificate(const CurveKeyPair& keys, bool secret) {
  std::string text = secret ? "#   ZeroMQ CURVE **Secret** Certificate\n"
                              "#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its "
                              "permissions.\n"
                            : "#   ZeroMQ CURVE Public Certificate\n"
                              "#   Written by pstrain-keygen for one role of a pstrain cluster.\n";
  text += "\nmetadata\ncurve\n    public-key = \"" + keys.public_key + "\"\n";
  if (secret) text += "    secret-key = \"" + keys.secret_key + "\"\n";
  return text;
}

// Writes `text` to `path` with exactly `mode`, whatever the umask or an older file's mode.
Status WriteFileWithMode(const std::string& path, const std::string& text, mode_t mode) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Unavailable("cannot write " + path + ": " + std::strerror(errno));
  bool ok = fchmod(fd, mode) == 0;
  for (size_t done = 0; ok && done < text.size();) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  const std::string error = std::strerror(errno);
  if (close(fd) != 0) ok = false;
  if (!ok) return Unavailable("cannot write " + path + ": " + error);
  return Status::OK();
}

// The `curve` section of a ZPL certificate (ZeroMQ RFC 4): `name = "value"` lines indented
// below a line `curve`; comments and other sections (metadata) are skipped.
Result<CurveKeyPair> ParseCertificate(const std::string& path, const std::string& text) {
  static const std::regex kEntry(R"re(^\s+([a-z-]+)\s*=\s*"([^"]*)"\s*$)re");
  CurveKeyPair keys;
  std::string section;
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    if (first == 0) {
      section = line.substr(0, line.find_last_not_of(" \t\r") + 1);
      continue;
    }
    if (section != "curve") continue;
    std::smatch m;
    if (!std::regex_match(line, m, kEntry)) {
      return InvalidArgument(path + ":" + std::to_string(number) +
                             ": expected `    public-key = \"<40 Z85 characters>\"`, got `" + line +
                             "`");
    }
    const std::string name = m[1], value = m[2];
    if (name != "public-key" && name != "secret-key") continue;
    if (!IsZ85Key(value)) {
      return InvalidArgument(path + ":" + std::to_string(number) + ": " + name +
                             " is not a CURVE key (expected 40 Z85 characters, got " +
                             std::to_string(value.size()) + ")");
    }
    (name == "public-key" ? keys.public_key : keys.secret_key) = value;
  }
  if (keys.public_key.empty()) {
    return InvalidArgument(path +
                           ": no public-key in a `curve` section (not a ZeroMQ "
                           "certificate?)");
  }
  return keys;
}

Result<std::string> ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read " + path + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// "ps-1.key" -> {"ps", 1}; false for any other name.
bool ParseRoleFile(const std::string& name, const std::string& suffix, std::string* job,
                   int* task) {
  static const std::regex kName(R"((ps|worker|evaluator)-(\d{1,6}))");
  if (name.size() <= suffix.size() ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return false;
  }
  std::smatch m;
  const std::string stem = name.substr(0, name.size() - suffix.size());
  if (!std::regex_match(stem, m, kName)) return false;
  *job = m[1];
  *task = std::stoi(m[2]);
  return true;
}

std::string RoleName(const std::string& job, int task) { return job + "-" + std::to_string(task); }

}  // namespace

Result<CurveKeyPair> NewCurveKeyPair() {
  char public_key[kZ85KeyLength + 1], secret_key[kZ85KeyLength + 1];
  if (zmq_curve_keypair(public_key, secret_key) != 0) {
    return Unavailable(std::string("zmq_curve_keypair: ") + zmq_strerror(zmq_errno()) +
                       " (is libzmq built with CURVE support?)");
  }
  return CurveKeyPair{public_key, secret_key};
}

Status WriteCurveCertificates(const std::string& path, const CurveKeyPair& keys) {
  if (!IsZ85Key(keys.public_key) || !IsZ85Key(keys.secret_key)) {
    return InvalidArgument("not a CURVE key pair for " + path);
  }
  RETURN_IF_ERROR(WriteFileWithMode(path + kSecretSuffix, Certificate(keys, true), 0600));
  return WriteFileWithMode(path, Certificate(keys, false), 0644);
}

Result<CurveKeyPair> ReadPublicCertificate(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadText(path));
  ASSIGN_OR_RETURN(CurveKeyPair keys, ParseCertificate(path, text));
  keys.secret_key.clear();
  return keys;
}

Result<CurveKeyPair> ReadSecretCertificate(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return NotFound("cannot read " + path + ": " + std::strerror(errno));
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return FailedPrecondition(path + " holds a secret key but group or others may read it (mode " +
                              mode + "); expected mode 0600 (chmod 600 " + path + ")");
  }
  ASSIGN_OR_RETURN(std::string text, ReadText(path));
  ASSIGN_OR_RETURN(CurveKeyPair keys, ParseCertificate(path, text));
  if (keys.secret_key.empty()) {
    return InvalidArgument(path +
                           ": no secret-key in its `curve` section (a public "
                           "certificate?)");
  }
  char derived[kZ85KeyLength + 1];
  if (zmq_curve_public(derived, keys.secret_key.c_str()) != 0 || keys.public_key != derived) {
    return InvalidArgument(path + ": its public-key does not belong to its secret-key");
  }
  return keys;
}

Security ClusterKeys::ForServer() const {
  Security s;
  if (!curve()) return s;
  s.own = own;
  s.own_name = own_name;
  s.client_keys = client_keys;
  // Servers replicate to one another (docs/replication.md), each under its own name.
  for (size_t t = 0; t < ps_keys.size(); ++t)
    s.client_keys[ps_keys[t]] = RoleName("ps", static_cast<int>(t));
  return s;
}

Result<Security> ClusterKeys::ForClientOf(int ps_task) const {
  Security s;
  if (!curve()) return s;
  if (ps_task < 0 || static_cast<size_t>(ps_task) >= ps_keys.size()) {
    return FailedPrecondition("no public key for ps task " + std::to_string(ps_task) + " in " +
                              dir + " (expected " + dir + "/" + RoleName("ps", ps_task) +
                              ".key; are the keys from another cluster?)");
  }
  s.own = own;
  s.own_name = own_name;
  s.server_key = ps_keys[ps_task];
  return s;
}

Result<ClusterKeys> LoadClusterKeys(const std::string& dir, const std::string& job,
                                    int task_index) {
  ClusterKeys keys;
  keys.dir = dir;
  const std::string own_name = RoleName(job, task_index);
  keys.own_name = own_name;
  ASSIGN_OR_RETURN(keys.own, ReadSecretCertificate(dir + "/" + own_name + ".key" + kSecretSuffix));
  std::error_code error;
  std::map<int, std::string> ps;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    std::string file_job;
    int task = 0;
    if (!ParseRoleFile(entry.path().filename().string(), ".key", &file_job, &task)) continue;
    ASSIGN_OR_RETURN(CurveKeyPair pair, ReadPublicCertificate(entry.path().string()));
    if (file_job == "ps") {
      ps[task] = pair.public_key;
    } else {
      keys.client_keys[pair.public_key] = RoleName(file_job, task);
    }
  }
  if (error) return NotFound("cannot list " + dir + ": " + error.message());
  for (const auto& [task, key] : ps) {
    if (static_cast<size_t>(task) != keys.ps_keys.size()) {
      return NotFound("missing " + dir + "/" + RoleName("ps", keys.ps_keys.size()) + ".key (" +
                      dir + " has ps keys up to ps-" + std::to_string(ps.rbegin()->first) + ")");
    }
    keys.ps_keys.push_back(key);
  }
  if (keys.ps_keys.empty()) {
    return NotFound("no ps public keys in " + dir + " (expected " + dir + "/ps-0.key)");
  }
  if (job == "ps" && keys.client_keys.empty()) {
    return NotFound("no worker or evaluator public keys in " + dir + " (expected " + dir +
                    "/worker-0.key): this server would let nobody in");
  }
  if (job == "ps" && (static_cast<size_t>(task_index) >= keys.ps_keys.size() ||
                      keys.ps_keys[task_index] != keys.own.public_key)) {
    return InvalidArgument(dir + "/" + own_name + ".key does not match " + dir + "/" + own_name +
                           ".key" + kSecretSuffix + ": clients would not trust this server");
  }
  return keys;
}

Status WriteClusterKeys(const std::string& dir, int ps, int workers, int evaluators) {
  if (ps < 1 || workers < 1 || evaluators < 0) {
    return InvalidArgument("a cluster needs at least one ps and one worker, got " +
                           std::to_string(ps) + " ps, " + std::to_string(workers) + " workers");
  }
  std::error_code error;
  if (fs::exists(dir, error) && !fs::is_empty(dir, error)) {
    return AlreadyExists(dir +
                         " exists and is not empty; expected a new directory (old keys "
                         "would stay valid)");
  }
  std::vector<std::pair<std::string, CurveKeyPair>> roles;
  for (const auto& [job, count] :
       {std::pair<std::string, int>{"ps", ps}, {"worker", workers}, {"evaluator", evaluators}}) {
    for (int i = 0; i < count; ++i) {
      ASSIGN_OR_RETURN(CurveKeyPair pair, NewCurveKeyPair());
      roles.emplace_back(RoleName(job, i), pair);
    }
  }
  // Private directories first, so that no secret is ever in a directory others can list.
  const auto make_private = [](const std::string& d) -> Status {
    std::error_code e;
    fs::create_directories(d, e);
    if (e || chmod(d.c_str(), 0700) != 0) {
      return Unavailable("cannot create " + d + ": " + (e ? e.message() : std::strerror(errno)));
    }
    return Status::OK();
  };
  RETURN_IF_ERROR(make_private(dir));
  for (const auto& [name, pair] : roles) {
    const std::string role_dir = dir + "/" + name;
    RETURN_IF_ERROR(make_private(role_dir));
    RETURN_IF_ERROR(WriteCurveCertificates(role_dir + "/" + name + ".key", pair));
    for (const auto& [other, other_pair] : roles) {
      if (other == name) continue;
      RETURN_IF_ERROR(WriteFileWithMode(role_dir + "/" + other + ".key",
                                        Certificate({other_pair.public_key, ""}, false), 0644));
    }
  }
  return Status::OK();
}

}  // namespace wire
}  // namespace pstrain
