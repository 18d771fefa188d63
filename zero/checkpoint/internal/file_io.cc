#include "zero/checkpoint/internal/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/crc32c.h"

namespace zero::checkpoint {
namespace {

absl::Status ErrnoError(std::string_view what, const std::string& path) {
  const int err = errno;
  const std::string message = absl::StrFormat("%s '%s': %s", what, path, std::strerror(err));
  return err == ENOENT ? absl::NotFoundError(message) : absl::InternalError(message);
}

std::atomic<FaultHook> fault_hook{nullptr};

// An injected fault as the step's error, naming the file like a real one.
absl::Status Injected(const absl::Status& fault, std::string_view what, const std::string& path) {
  return absl::Status(fault.code(), absl::StrFormat("%s '%s': %s", what, path, fault.message()));
}

}  // namespace

void SetFaultHookForTesting(FaultHook hook) { fault_hook.store(hook); }

absl::Status FaultPoint(FileOp op, std::string_view path) {
  const FaultHook hook = fault_hook.load(std::memory_order_relaxed);
  return hook == nullptr ? absl::OkStatus() : hook(op, path);
}

// ----------------------------------------------------------------- writer

AtomicFileWriter::AtomicFileWriter(std::string path, std::string tmp, DirectFile file)
    : path_(std::move(path)), tmp_(std::move(tmp)), file_(std::move(file)) {}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& other) noexcept
    : path_(std::move(other.path_)),
      tmp_(std::move(other.tmp_)),
      file_(std::exchange(other.file_, std::nullopt)),
      bytes_(other.bytes_),
      crc_(other.crc_) {}

AtomicFileWriter::~AtomicFileWriter() {
  if (file_) Discard();
}

absl::StatusOr<AtomicFileWriter> AtomicFileWriter::Open(const std::string& path) {
  std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  if (absl::Status f = FaultPoint(FileOp::kCreate, tmp); !f.ok()) {
    return Injected(f, "cannot create", tmp);
  }
  absl::StatusOr<DirectFile> file = DirectFile::Open(tmp, FileMode::kWrite);
  if (!file.ok()) return file.status();
  return AtomicFileWriter(path, std::move(tmp), *std::move(file));
}

absl::Status AtomicFileWriter::Fail(absl::Status status) {
  Discard();
  return status;
}

void AtomicFileWriter::Discard() {
  file_.reset();
  unlink(tmp_.c_str());
}

absl::Status AtomicFileWriter::Append(const void* data, size_t bytes) {
  return Append(data, bytes, Crc32c(data, bytes));
}

absl::Status AtomicFileWriter::Append(const void* data, size_t bytes, uint32_t data_crc) {
  if (!file_) return absl::FailedPreconditionError(absl::StrCat("'", path_, "' is closed"));
  crc_ = Crc32cCombine(crc_, data_crc, bytes);
  if (absl::Status f = FaultPoint(FileOp::kWrite, tmp_); !f.ok()) {
    return Fail(Injected(f, "cannot write", tmp_));
  }
  if (absl::Status s = file_->WriteAt(bytes_, data, bytes); !s.ok()) return Fail(s);
  bytes_ += bytes;
  return absl::OkStatus();
}

absl::Status AtomicFileWriter::Commit() {
  if (!file_) return absl::FailedPreconditionError(absl::StrCat("'", path_, "' is closed"));
  if (absl::Status f = FaultPoint(FileOp::kFsync, tmp_); !f.ok()) {
    return Fail(Injected(f, "cannot fsync", tmp_));
  }
  if (absl::Status s = file_->Sync(); !s.ok()) return Fail(s);
  file_.reset();
  if (absl::Status f = FaultPoint(FileOp::kRename, tmp_); !f.ok()) {
    unlink(tmp_.c_str());
    return Injected(f, "cannot rename into place", tmp_);
  }
  if (rename(tmp_.c_str(), path_.c_str()) != 0) {
    absl::Status status = ErrnoError("cannot rename into place", tmp_);
    unlink(tmp_.c_str());
    return status;
  }
  const size_t slash = path_.rfind('/');
  return SyncDirectory(slash == std::string::npos ? "." : path_.substr(0, slash));
}

// ----------------------------------------------------------------- reader

RandomAccessFile::RandomAccessFile(std::string path, int fd, uint64_t size)
    : path_(std::move(path)), fd_(fd), size_(size) {}

RandomAccessFile::RandomAccessFile(RandomAccessFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), size_(other.size_) {}

RandomAccessFile::~RandomAccessFile() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<RandomAccessFile> RandomAccessFile::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", path);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    absl::Status status = ErrnoError("cannot stat", path);
    close(fd);
    return status;
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat("'", path, "' is not a regular file"));
  }
  return RandomAccessFile(path, fd, static_cast<uint64_t>(st.st_size));
}

absl::Status RandomAccessFile::ReadAt(uint64_t offset, void* dst, size_t bytes) const {
  auto* p = static_cast<char*>(dst);
  for (size_t done = 0; done < bytes;) {
    const ssize_t n = pread(fd_, p + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("cannot read", path_);
    if (n == 0) {
      return absl::DataLossError(
          absl::StrFormat("'%s' ends at byte %d, before the %d bytes at offset %d: truncated",
                          path_, offset + done, bytes, offset));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// ----------------------------------------------------------------- helpers

absl::Status WriteWholeFileAtomically(const std::string& path, std::string_view contents) {
  absl::StatusOr<AtomicFileWriter> writer = AtomicFileWriter::Open(path);
  if (!writer.ok()) return writer.status();
  if (absl::Status s = writer->Append(contents.data(), contents.size()); !s.ok()) return s;
  return writer->Commit();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  absl::StatusOr<RandomAccessFile> file = RandomAccessFile::Open(path);
  if (!file.ok()) return file.status();
  std::string contents(file->size(), '\0');
  if (absl::Status s = file->ReadAt(0, contents.data(), contents.size()); !s.ok()) return s;
  return contents;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

absl::Status SyncDirectory(const std::string& dir) {
  if (absl::Status f = FaultPoint(FileOp::kSyncFolder, dir); !f.ok()) {
    return Injected(f, "cannot fsync folder", dir);
  }
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open folder", dir);
  const bool ok = fsync(fd) == 0;
  absl::Status status = ok ? absl::OkStatus() : ErrnoError("cannot fsync folder", dir);
  close(fd);
  return status;
}

absl::Status MakeDirectories(const std::string& path) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = path.substr(0, slash);
    if (!prefix.empty() && mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoError("cannot create folder", prefix);
    }
    if (slash == std::string::npos) break;
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return ErrnoError("cannot create folder", path);
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("'", path, "' is not a folder"));
  }
  return absl::OkStatus();
}

}  // namespace zero::checkpoint
