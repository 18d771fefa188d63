#include "base/direct_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace zero {
namespace {

const char* Verb(bool read) { return read ? "read" : "write"; }

absl::Status TransferError(int err, bool read, size_t bytes, uint64_t offset,
                           const std::string& path) {
  return absl::ErrnoToStatus(err, absl::StrFormat("%s of %d bytes at offset %d %s '%s'", Verb(read),
                                                  bytes, offset, read ? "from" : "to", path));
}

int OpenFlags(FileMode mode) {
  switch (mode) {
    case FileMode::kRead:
      return O_RDONLY;
    case FileMode::kWrite:
      return O_RDWR | O_CREAT | O_TRUNC;
    case FileMode::kReadWrite:
      return O_RDWR | O_CREAT;
    case FileMode::kCreateNew:
      return O_RDWR | O_CREAT | O_EXCL;
  }
  return O_RDONLY;
}

}  // namespace

DirectFile::DirectFile(std::string path, int buffered_fd, int direct_fd)
    : path_(std::move(path)), buffered_fd_(buffered_fd), direct_fd_(direct_fd) {
  direct_.store(direct_fd >= 0);
}

DirectFile::DirectFile(DirectFile&& other) noexcept
    : path_(std::move(other.path_)),
      buffered_fd_(std::exchange(other.buffered_fd_, -1)),
      direct_fd_(std::exchange(other.direct_fd_, -1)) {
  direct_.store(other.direct_.exchange(false));
}

DirectFile& DirectFile::operator=(DirectFile&& other) noexcept {
  if (this == &other) return *this;
  Close();
  path_ = std::move(other.path_);
  buffered_fd_ = std::exchange(other.buffered_fd_, -1);
  direct_fd_ = std::exchange(other.direct_fd_, -1);
  direct_.store(other.direct_.exchange(false));
  return *this;
}

DirectFile::~DirectFile() { Close(); }

void DirectFile::Close() {
  if (direct_fd_ >= 0) close(direct_fd_);
  if (buffered_fd_ >= 0) close(buffered_fd_);
  direct_fd_ = buffered_fd_ = -1;
}

absl::StatusOr<DirectFile> DirectFile::Open(const std::string& path, FileMode mode,
                                            DirectFileOptions options) {
  // The buffered descriptor creates or truncates; the direct one only
  // reopens what is now there, so the mode's effect happens once.
  const int flags = OpenFlags(mode) | O_CLOEXEC;
  const int buffered = open(path.c_str(), flags, 0644);
  if (buffered < 0) {
    return absl::ErrnoToStatus(errno, absl::StrFormat("cannot open '%s'", path));
  }
  int direct = -1;
  if (options.direct) {
    direct = open(path.c_str(), (flags & ~(O_CREAT | O_TRUNC | O_EXCL)) | O_DIRECT);
    // EINVAL: the filesystem has no O_DIRECT (tmpfs); buffered it is.
    if (direct < 0 && errno != EINVAL) {
      const int err = errno;
      close(buffered);
      // The buffered open made it: a fresh file left behind would be a stale one.
      if (mode == FileMode::kCreateNew) (void)unlink(path.c_str());
      return absl::ErrnoToStatus(err, absl::StrFormat("cannot open '%s' with O_DIRECT", path));
    }
  }
  return DirectFile(path, buffered, direct);
}

absl::StatusOr<size_t> DirectFile::TransferOn(int fd, Op op, uint64_t offset, char* data,
                                              size_t bytes) {
  const bool read = op == Op::kRead;
  const bool is_direct = fd == direct_fd_;
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = read ? pread(fd, data + done, bytes - done, offset + done)
                           : pwrite(fd, data + done, bytes - done, offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && is_direct && errno == EINVAL) {
      // Opened but refused at the transfer (some overlayfs): buffered from
      // now on, for this request's rest and every later one.
      direct_.store(false, std::memory_order_relaxed);
      return done;
    }
    if (n < 0) return TransferError(errno, read, bytes - done, offset + done, path_);
    if (n == 0) return done;  // the file ended (reads)
    done += static_cast<size_t>(n);
    // A short direct transfer leaves an unaligned rest: the caller finishes it.
    if (is_direct && done % kAlignment != 0) return done;
  }
  return done;
}

absl::Status DirectFile::TransferBuffered(Op op, uint64_t offset, char* data, size_t bytes) {
  ASSIGN_OR_RETURN(size_t moved, TransferOn(buffered_fd_, op, offset, data, bytes));
  if (moved == bytes) return absl::OkStatus();
  if (op == Op::kRead) {
    return absl::OutOfRangeError(
        absl::StrFormat("read of %d bytes at offset %d from '%s': the file ends at %d", bytes,
                        offset, path_, offset + moved));
  }
  return absl::DataLossError(
      absl::StrFormat("write of %d bytes at offset %d to '%s' stopped after %d bytes", bytes,
                      offset, path_, moved));
}

absl::Status DirectFile::Transfer(Op op, uint64_t offset, char* data, size_t bytes) {
  uint64_t at = offset;
  const uint64_t end = offset + bytes;
  if (direct()) {
    // The aligned middle goes direct when the memory there is aligned too.
    const uint64_t begin = RoundUpToAlignment(offset);
    const uint64_t aligned_end = end / kAlignment * kAlignment;
    char* middle = data + (begin - offset);
    if (begin < aligned_end && reinterpret_cast<uintptr_t>(middle) % kAlignment == 0) {
      RETURN_IF_ERROR(TransferBuffered(op, offset, data, begin - offset));
      ASSIGN_OR_RETURN(size_t moved,
                       TransferOn(direct_fd_, op, begin, middle, aligned_end - begin));
      at = begin + moved;
    }
  }
  return TransferBuffered(op, at, data + (at - offset), end - at);
}

absl::Status DirectFile::WriteAt(uint64_t offset, const void* data, size_t bytes) {
  // pwrite does not write through the pointer; one Transfer serves both.
  return Transfer(Op::kWrite, offset, const_cast<char*>(static_cast<const char*>(data)), bytes);
}

absl::Status DirectFile::ReadAt(uint64_t offset, void* data, size_t bytes) {
  return Transfer(Op::kRead, offset, static_cast<char*>(data), bytes);
}

absl::Status DirectFile::Sync() {
  // fdatasync covers the file's data whichever descriptor wrote it.
  if (fdatasync(buffered_fd_) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrFormat("fdatasync of '%s'", path_));
  }
  return absl::OkStatus();
}

absl::Status DirectFile::Truncate(uint64_t bytes) {
  if (ftruncate(buffered_fd_, static_cast<off_t>(bytes)) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrFormat("truncating '%s' to %d bytes", path_, bytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> DirectFile::Size() const {
  struct stat st;
  if (fstat(buffered_fd_, &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrFormat("fstat of '%s'", path_));
  }
  return static_cast<uint64_t>(st.st_size);
}

absl::StatusOr<AlignedBuffer> AllocateAlignedBuffer(size_t bytes) {
  void* p = nullptr;
  const size_t rounded = RoundUpToAlignment(bytes == 0 ? 1 : bytes);
  // Staging buffers are large and filled by the kernel (O_DIRECT pins their
  // pages before the transfer): first-touching them in 4 KiB pages costs
  // about as much time as the disk (1.3 GB/s measured). Transparent huge
  // pages, where the kernel offers them, fault 2 MiB at a time.
  constexpr size_t kHugePage = size_t{2} << 20;
  const bool huge = rounded >= kHugePage;
  if (posix_memalign(&p, huge ? kHugePage : DirectFile::kAlignment, rounded) != 0) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("cannot allocate %d bytes of aligned host memory", rounded));
  }
  if (huge) (void)madvise(p, rounded, MADV_HUGEPAGE);  // advice only: 4 KiB pages also work
  return AlignedBuffer(static_cast<std::byte*>(p));
}

}  // namespace zero
