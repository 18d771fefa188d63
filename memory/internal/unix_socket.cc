#include "memory/internal/unix_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace zero::internal {
namespace {

absl::Status Errno(std::string_view what) {
  return absl::InternalError(absl::StrFormat("%s: %s", what, std::strerror(errno)));
}

// An abstract address: a leading NUL, then the name (no terminator).
absl::StatusOr<std::pair<sockaddr_un, socklen_t>> Address(std::string_view name) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (name.empty() || name.size() + 1 > sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("socket name '%s': 1 to %d characters", name, sizeof(addr.sun_path) - 1));
  }
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  return std::make_pair(addr, static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 +
                                                     name.size()));
}

// Message boundaries are kept (SEQPACKET): one message, one recvmsg.
absl::StatusOr<Fd> NewSocket() {
  Fd fd(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Errno("socket(AF_UNIX)");
  return fd;
}

int MillisUntil(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
}

// Readable (or closed) before the deadline.
absl::Status AwaitReadable(int fd, absl::Time deadline, std::string_view what) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, MillisUntil(deadline));
    if (ready > 0) return absl::OkStatus();
    if (ready < 0 && errno != EINTR) return Errno("poll");
    if (ready == 0) {
      return absl::DeadlineExceededError(absl::StrFormat("timed out waiting for %s", what));
    }
  }
}

}  // namespace

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.release();
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) close(fd_);
}

int Fd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

absl::StatusOr<Fd> Listen(std::string_view name) {
  auto addr = Address(name);
  if (!addr.ok()) return addr.status();
  absl::StatusOr<Fd> fd = NewSocket();
  if (!fd.ok()) return fd.status();
  if (bind(fd->get(), reinterpret_cast<const sockaddr*>(&addr->first), addr->second) != 0) {
    if (errno == EADDRINUSE) {
      return absl::AlreadyExistsError(
          absl::StrFormat("another process already listens at '%s'", name));
    }
    return Errno(absl::StrFormat("bind('%s')", name));
  }
  if (listen(fd->get(), 64) != 0) return Errno("listen");
  return fd;
}

absl::StatusOr<Fd> Accept(const Fd& listener, absl::Time deadline) {
  for (;;) {
    if (absl::Status s = AwaitReadable(listener.get(), deadline, "a process to connect");
        !s.ok()) {
      return s;
    }
    Fd fd(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (fd.valid()) return fd;
    if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) return Errno("accept");
  }
}

absl::StatusOr<Fd> Connect(std::string_view name, absl::Time deadline) {
  auto addr = Address(name);
  if (!addr.ok()) return addr.status();
  for (;;) {
    absl::StatusOr<Fd> fd = NewSocket();
    if (!fd.ok()) return fd.status();
    if (connect(fd->get(), reinterpret_cast<const sockaddr*>(&addr->first), addr->second) == 0) {
      return fd;
    }
    // Nobody listens yet (the leader starts later), or its backlog is full.
    if (errno != ECONNREFUSED && errno != ENOENT && errno != EAGAIN && errno != EINTR) {
      return Errno(absl::StrFormat("connect('%s')", name));
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrFormat("nobody listened at '%s' before the deadline", name));
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
}

absl::Status Send(const Fd& socket, const void* bytes, size_t size, absl::Span<const int> fds) {
  iovec io{const_cast<void*>(bytes), size};
  msghdr msg{};
  msg.msg_iov = &io;
  msg.msg_iovlen = 1;
  std::vector<char> control(fds.empty() ? 0 : CMSG_SPACE(sizeof(int) * fds.size()));
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* header = CMSG_FIRSTHDR(&msg);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
  }
  for (;;) {
    const ssize_t sent = sendmsg(socket.get(), &msg, MSG_NOSIGNAL);
    if (sent == static_cast<ssize_t>(size)) return absl::OkStatus();
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      return absl::UnavailableError("the other process closed the connection");
    }
    return sent < 0 ? Errno("sendmsg") : absl::InternalError("sendmsg sent part of a message");
  }
}

absl::Status Receive(const Fd& socket, void* bytes, size_t size, absl::Time deadline,
                     std::vector<Fd>* fds, size_t max_fds) {
  if (absl::Status s = AwaitReadable(socket.get(), deadline, "the other process"); !s.ok()) {
    return s;
  }
  iovec io{bytes, size};
  msghdr msg{};
  msg.msg_iov = &io;
  msg.msg_iovlen = 1;
  std::vector<char> control(max_fds == 0 ? 0 : CMSG_SPACE(sizeof(int) * max_fds));
  msg.msg_control = control.empty() ? nullptr : control.data();
  msg.msg_controllen = control.size();
  ssize_t got;
  do {
    got = recvmsg(socket.get(), &msg, MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  // Descriptors first: they are ours once received, whatever else failed.
  for (cmsghdr* h = CMSG_FIRSTHDR(&msg); h != nullptr; h = CMSG_NXTHDR(&msg, h)) {
    if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
    const size_t n = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof(int));
      if (fds != nullptr) {
        fds->emplace_back(fd);
      } else {
        close(fd);
      }
    }
  }
  if (got == 0) return absl::UnavailableError("the other process closed the connection");
  if (got < 0) {
    if (errno == ECONNRESET) return absl::UnavailableError("the other process reset the connection");
    return Errno("recvmsg");
  }
  if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 || static_cast<size_t>(got) != size) {
    return absl::DataLossError(
        absl::StrFormat("a message of %d bytes where %d were expected", got, size));
  }
  return absl::OkStatus();
}

}  // namespace zero::internal
