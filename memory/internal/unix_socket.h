// A node's meeting point for its processes: a Unix stream socket in the
// abstract namespace (no file is created, so nothing is left behind when a
// process dies), fixed-size messages, and file descriptors passed with
// SCM_RIGHTS. Every wait has a deadline. Used once, at start-up, by
// node_range.cc; not thread-safe (one socket, one thread).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace zero::internal {

// Owns one descriptor; closes it on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  ~Fd();
  int get() const { return fd_; }
  int release();
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// The leader's listening socket at `name` (abstract). AlreadyExists when a
// live process listens there already.
absl::StatusOr<Fd> Listen(std::string_view name);
// One peer's connection, or DeadlineExceeded.
absl::StatusOr<Fd> Accept(const Fd& listener, absl::Time deadline);
// Connects to `name`, retrying while nobody listens yet, until `deadline`.
absl::StatusOr<Fd> Connect(std::string_view name, absl::Time deadline);

// Sends `bytes` and, with them, `fds` (may be empty).
absl::Status Send(const Fd& socket, const void* bytes, size_t size, absl::Span<const int> fds = {});
// Receives exactly `size` bytes and up to `max_fds` descriptors (owned by the
// caller). DeadlineExceeded at the deadline; Unavailable when the peer closed.
absl::Status Receive(const Fd& socket, void* bytes, size_t size, absl::Time deadline,
                     std::vector<Fd>* fds = nullptr, size_t max_fds = 0);

}  // namespace zero::internal
