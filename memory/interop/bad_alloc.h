// The exception the standard-library shims (pmr, Thrust) throw when the pool
// says no. Those interfaces have no other way to fail; the C shim and all
// other code in this project return absl::Status instead. Carries the pool's
// status, so what() says the device, the request and what is free.
#pragma once

#include <new>
#include <string>
#include <utility>

#include "absl/status/status.h"

namespace zero {

class BadAlloc final : public std::bad_alloc {
 public:
  explicit BadAlloc(absl::Status status)
      : status_(std::move(status)), what_(status_.ToString()) {}
  const char* what() const noexcept override { return what_.c_str(); }
  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
  std::string what_;
};

}  // namespace zero
