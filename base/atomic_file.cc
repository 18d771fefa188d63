#include "base/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zero {

absl::Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  auto fail = [&](const char* what) {
    absl::Status status = absl::InternalError(
        absl::StrFormat("%s '%s': %s", what, tmp, std::strerror(errno)));
    unlink(tmp.c_str());
    return status;
  };
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(
      absl::StrFormat("cannot create '%s': %s", tmp, std::strerror(errno)));
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = write(fd, contents.data() + written, contents.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      close(fd);
      return fail("cannot write");
    }
    written += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    close(fd);
    return fail("cannot fsync");
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) return fail("cannot rename into place");
  return absl::OkStatus();
}

}  // namespace zero
