// Files that appear whole or not at all: bytes go to "<path>.tmp-<pid>", which is fsync'd,
// renamed over <path>, and then the directory is fsync'd so the rename survives a power cut.
// A crash leaves at most a stray .tmp file; readers never see a partial file at <path>.
#pragma once

#include <string>

#include "common/status.h"

namespace pstrain {

class AtomicFileWriter {
 public:
  static Result<AtomicFileWriter> Create(const std::string& path);
  AtomicFileWriter(AtomicFileWriter&& o) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&& o) noexcept;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  // Removes the temporary file unless Commit() succeeded.
  ~AtomicFileWriter();

  // Small pieces are gathered and go out with the next large one, so a large buffer (a
  // tensor) costs one write call and is never copied.
  Status Append(const void* data, size_t n);
  // Flushes, fsyncs, renames over the final path and fsyncs the directory.
  Status Commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  AtomicFileWriter(int fd, std::string path, std::string temp_path)
      : fd_(fd), path_(std::move(path)), temp_path_(std::move(temp_path)) {}
  Status WriteGathered(const void* data, size_t n);
  void Abandon();

  int fd_ = -1;
  std::string path_;
  std::string temp_path_;
  std::string pending_;
};

// Writes `contents` to `path` through an AtomicFileWriter.
Status WriteFileAtomically(const std::string& path, const std::string& contents);
// NotFound when `path` does not exist.
Result<std::string> ReadFileToString(const std::string& path);
// Reads exactly n bytes from fd; false on a short read or error.
bool ReadFull(int fd, void* data, size_t n);

}  // namespace pstrain
