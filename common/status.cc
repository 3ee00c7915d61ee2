#include "common/status.h"

#include "common/enum_names.h"

namespace pstrain {

constexpr EnumName<StatusCode> kStatusCodes[] = {
    {StatusCode::kOk, "OK"},
    {StatusCode::kInvalidArgument, "InvalidArgument"},
    {StatusCode::kNotFound, "NotFound"},
    {StatusCode::kAlreadyExists, "AlreadyExists"},
    {StatusCode::kFailedPrecondition, "FailedPrecondition"},
    {StatusCode::kOutOfRange, "OutOfRange"},
    {StatusCode::kDataLoss, "DataLoss"},
    {StatusCode::kUnavailable, "Unavailable"},
    {StatusCode::kResourceExhausted, "ResourceExhausted"},
    {StatusCode::kInternal, "Internal"},
    {StatusCode::kPermissionDenied, "PermissionDenied"},
    {StatusCode::kAborted, "Aborted"},
    {StatusCode::kUninitialized, "Uninitialized"}};

const char* StatusCodeName(StatusCode code) { return NameOf(kStatusCodes, code, "Unknown"); }

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

Status Status::WithContext(const std::string& prefix) const {
  if (ok()) return *this;
  return Status(code_, prefix + ": " + message_);
}

}  // namespace pstrain
