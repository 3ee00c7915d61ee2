// Errors as values at every boundary: a Status names what was wrong and what was expected.
// CHECK is kept for programmer errors only.
#pragma once

#include <glog/logging.h>

#include <optional>
#include <string>
#include <utility>

namespace pstrain {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kOutOfRange,
  kDataLoss,
  kUnavailable,
  kResourceExhausted,
  kInternal,
  kPermissionDenied,  // the sender's role may not make this request (added last: on the wire)
  // Not the head of this shard at the sender's map epoch: fetch the map and resend
  // (docs/replication.md; added last: codes travel on the wire).
  kAborted,
  // A parameter server that holds no variables (not initialised yet, or restarted): the chief
  // initialises it, everyone else waits (added last: codes travel on the wire).
  kUninitialized,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: <message>", or "OK".
  std::string ToString() const;
  // Returns a copy whose message is "<prefix>: <message>", for adding context on the way up.
  Status WithContext(const std::string& prefix) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status PermissionDenied(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}
inline Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status Uninitialized(std::string m) { return {StatusCode::kUninitialized, std::move(m)}; }

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    CHECK(!status_.ok()) << "Result built from an OK status without a value";
  }
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & {
    CHECK(ok()) << status_.ToString();
    return *value_;
  }
  const T& value() const& {
    CHECK(ok()) << status_.ToString();
    return *value_;
  }
  T&& value() && {
    CHECK(ok()) << status_.ToString();
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace pstrain

#define PSTRAIN_CONCAT_INNER(a, b) a##b
#define PSTRAIN_CONCAT(a, b) PSTRAIN_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)       \
  do {                              \
    ::pstrain::Status _st = (expr); \
    if (!_st.ok()) return _st;      \
  } while (0)

// ASSIGN_OR_RETURN(auto x, MakeX()); returns the error Status if MakeX() failed.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(PSTRAIN_CONCAT(_result_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()
