#include "base/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zero {
namespace {

// errno as a status (ENOSPC: ResourceExhausted, EACCES: PermissionDenied...).
absl::Status Errno(int err, const char* what, const std::string& file) {
  return absl::ErrnoToStatus(err, absl::StrFormat("%s '%s'", what, file));
}

absl::Status WriteAll(int fd, std::string_view contents, const std::string& tmp) {
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno(errno, "cannot write", tmp);
    written += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) return Errno(errno, "cannot fsync", tmp);
  return absl::OkStatus();
}

// The rename is durable once the folder's entry is.
absl::Status SyncFolderOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string folder = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const int fd = open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno(errno, "cannot open the folder", folder);
  const int synced = fsync(fd);
  const int err = errno;
  close(fd);
  return synced == 0 ? absl::OkStatus() : Errno(err, "cannot fsync the folder", folder);
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  // A temporary of its own per call: two threads writing one path each
  // rename a whole file, never one that both wrote.
  std::string tmp = absl::StrCat(path, ".tmp.XXXXXX");
  std::vector<char> name(tmp.begin(), tmp.end());
  name.push_back('\0');
  const int fd = mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) return Errno(errno, "cannot create", tmp);
  tmp = name.data();
  absl::Status status = fchmod(fd, 0644) == 0 ? absl::OkStatus()
                                              : Errno(errno, "cannot set the mode of", tmp);
  if (status.ok()) status = WriteAll(fd, contents, tmp);
  close(fd);
  if (status.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
    status = Errno(errno, "cannot rename into place", tmp);
  }
  if (!status.ok()) {
    unlink(tmp.c_str());
    return status;
  }
  return SyncFolderOf(path);
}

}  // namespace zero
