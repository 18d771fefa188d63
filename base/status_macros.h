// Status plumbing that abseil 20220623 (Debian 12) does not ship yet.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#define ZERO_CONCAT_INNER_(a, b) a##b
#define ZERO_CONCAT_(a, b) ZERO_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                    \
  do {                                           \
    ::absl::Status zero_status_ = (expr);        \
    if (!zero_status_.ok()) return zero_status_; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, MakeX());` binds the value or returns the error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ZERO_ASSIGN_OR_RETURN_IMPL_(ZERO_CONCAT_(zero_statusor_, __LINE__), lhs, expr)
#define ZERO_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return std::move(tmp).status();    \
  lhs = std::move(tmp).value()

namespace zero {

// The same error with "`prefix`: " in front of its message (OK stays OK).
inline absl::Status Annotate(const absl::Status& status, absl::string_view prefix) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(prefix, ": ", status.message()));
}

}  // namespace zero
