#include "common/checkpoint/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pstrain {
namespace {

// Below this a piece is gathered rather than written on its own.
constexpr size_t kGatherBytes = 64 * 1024;

std::string Errno() { return std::strerror(errno); }

std::string DirectoryOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status SyncDirectory(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Unavailable("cannot open directory '" + dir + "' to fsync: " + Errno());
  int rc = fsync(fd);
  std::string err = Errno();
  close(fd);
  if (rc != 0) return Unavailable("fsync of directory '" + dir + "': " + err);
  return Status::OK();
}

}  // namespace

Result<AtomicFileWriter> AtomicFileWriter::Create(const std::string& path) {
  std::string temp_path = path + ".tmp-" + std::to_string(getpid());
  int fd = open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Unavailable("cannot create '" + temp_path + "': " + Errno());
  return AtomicFileWriter(fd, path, std::move(temp_path));
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& o) noexcept
    : fd_(o.fd_),
      path_(std::move(o.path_)),
      temp_path_(std::move(o.temp_path_)),
      pending_(std::move(o.pending_)) {
  o.fd_ = -1;
}

AtomicFileWriter& AtomicFileWriter::operator=(AtomicFileWriter&& o) noexcept {
  if (this != &o) {
    Abandon();
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    temp_path_ = std::move(o.temp_path_);
    pending_ = std::move(o.pending_);
    o.fd_ = -1;
  }
  return *this;
}

AtomicFileWriter::~AtomicFileWriter() { Abandon(); }

void AtomicFileWriter::Abandon() {
  if (fd_ < 0) return;
  close(fd_);
  fd_ = -1;
  unlink(temp_path_.c_str());
}

Status AtomicFileWriter::Append(const void* data, size_t n) {
  if (fd_ < 0) return FailedPrecondition("writer for '" + path_ + "' is closed");
  if (n < kGatherBytes) {
    pending_.append(static_cast<const char*>(data), n);
    if (pending_.size() < kGatherBytes) return Status::OK();
    return WriteGathered(nullptr, 0);
  }
  return WriteGathered(data, n);
}

// One writev of the gathered small pieces followed by `data`, resumed after short writes.
Status AtomicFileWriter::WriteGathered(const void* data, size_t n) {
  iovec iov[2] = {{pending_.data(), pending_.size()}, {const_cast<void*>(data), n}};
  int first = pending_.empty() ? 1 : 0;
  while (first < 2) {
    ssize_t wrote = writev(fd_, iov + first, 2 - first);
    if (wrote < 0) {
      if (errno == EINTR) continue;
      return Unavailable("writing '" + temp_path_ + "': " + Errno());
    }
    size_t left = static_cast<size_t>(wrote);
    while (first < 2 && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (first < 2) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  pending_.clear();
  return Status::OK();
}

Status AtomicFileWriter::Commit() {
  if (fd_ < 0) return FailedPrecondition("writer for '" + path_ + "' is closed");
  if (!pending_.empty()) RETURN_IF_ERROR(WriteGathered(nullptr, 0));
  if (fsync(fd_) != 0) return Unavailable("fsync '" + temp_path_ + "': " + Errno());
  int rc = close(fd_);
  fd_ = -1;
  if (rc != 0) {
    std::string err = Errno();
    unlink(temp_path_.c_str());
    return Unavailable("closing '" + temp_path_ + "': " + err);
  }
  if (rename(temp_path_.c_str(), path_.c_str()) != 0) {
    std::string err = Errno();
    unlink(temp_path_.c_str());
    return Unavailable("renaming '" + temp_path_ + "' to '" + path_ + "': " + err);
  }
  return SyncDirectory(DirectoryOf(path_));
}

Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  ASSIGN_OR_RETURN(AtomicFileWriter writer, AtomicFileWriter::Create(path));
  RETURN_IF_ERROR(writer.Append(contents.data(), contents.size()));
  return writer.Commit();
}

bool ReadFull(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t got = read(fd, p, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

Result<std::string> ReadFileToString(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound("'" + path + "' does not exist");
    return Unavailable("cannot open '" + path + "': " + Errno());
  }
  std::string contents;
  char buf[64 * 1024];
  while (true) {
    ssize_t got = read(fd, buf, sizeof(buf));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      std::string err = Errno();
      close(fd);
      return Unavailable("reading '" + path + "': " + err);
    }
    if (got == 0) break;
    contents.append(buf, static_cast<size_t>(got));
  }
  close(fd);
  return contents;
}

}  // namespace pstrain
