#include "tests/summary/event_test_util.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "common/record_io.h"
#include "tests/test_env.h"

namespace pstrain {

ScopedLogdir::ScopedLogdir(const std::string& name)
    : path_(::testing::TempDir() + name + "_XXXXXX") {
  CHECK(mkdtemp(path_.data()) != nullptr) << "mkdtemp " << path_;
}

ScopedLogdir::~ScopedLogdir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::vector<std::string> EventFiles(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().find("tfevents") != std::string::npos) {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

Result<std::vector<tensorflow::Event>> ReadEvents(const std::string& path) {
  ASSIGN_OR_RETURN(RecordReader reader, RecordReader::Open(path));
  std::vector<tensorflow::Event> events;
  std::string record;
  while (true) {
    Status status = reader.Next(&record);
    if (status.code() == StatusCode::kOutOfRange) break;
    RETURN_IF_ERROR(status);
    tensorflow::Event event;
    if (!event.ParseFromString(record)) {
      return DataLoss("record " + std::to_string(events.size()) + " of " + path +
                      " is not an Event");
    }
    events.push_back(std::move(event));
  }
  return events;
}

std::string TestPythonFromEnv() {
  const std::string python = testing::TestPython();
  if (python.empty() || !std::filesystem::is_regular_file(python)) return "";
  return python;
}

std::string ScriptPath(const std::string& name) {
  const std::string source = testing::SourceDir();
  if (source.empty()) return "";
  return source + "/tests/summary/" + name;
}

namespace {

// Single-quoted for /bin/sh.
std::string ShellQuote(const std::string& s) {
  std::string quoted = "'";
  for (char c : s) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace

CommandResult RunPython(const std::string& python, const std::string& script,
                        const std::vector<std::string>& args) {
  std::string command = ShellQuote(python) + " " + ShellQuote(script);
  for (const std::string& arg : args) command += " " + ShellQuote(arg);
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[65536];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.out.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace pstrain
