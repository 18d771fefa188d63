// Positional file I/O at the disk's speed: O_DIRECT where the filesystem
// allows it, so large transfers bypass the page cache (no copy, no cache
// pollution, no writeback storm at fsync). Shared by checkpoints and the
// NVMe offload tier.
//
// O_DIRECT wants offsets, sizes and buffers aligned to kAlignment. Callers
// need not care: the aligned middle of a request goes direct, and unaligned
// heads and tails (or a buffer whose address is not aligned like the
// offset) go through a second, buffered descriptor of the same file. The
// kernel keeps the two coherent (direct I/O writes back and drops the
// cached pages it overlaps). Full speed needs aligned requests in
// AllocateAlignedBuffer memory.
//
// Thread-safety: ReadAt and WriteAt may run from several threads at once
// (pread/pwrite; disjoint ranges for writes); Sync and Truncate too. Open,
// move and destruction are not concurrent with anything.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zero {

struct DirectFileOptions {
  bool direct = true;  // O_DIRECT when the filesystem allows
};

enum class FileMode {
  kRead,
  kWrite,      // create or truncate
  kReadWrite,  // create if missing, keep the contents
  kCreateNew,  // create; AlreadyExists when the path exists (another owner's file)
};

// A file opened for positional I/O; move-only, closes on destruction.
// Errors name the path, the offset and the system's reason.
class DirectFile {
 public:
  static constexpr size_t kAlignment = 4096;  // offsets, sizes and buffers for O_DIRECT

  static absl::StatusOr<DirectFile> Open(const std::string& path, FileMode mode,
                                         DirectFileOptions options = {});
  DirectFile(DirectFile&& other) noexcept;
  DirectFile& operator=(DirectFile&& other) noexcept;
  ~DirectFile();

  // The whole write (short writes and EINTR retried). ENOSPC is
  // ResourceExhausted.
  absl::Status WriteAt(uint64_t offset, const void* data, size_t bytes);
  // The whole read; OutOfRange naming the file when it ends first.
  absl::Status ReadAt(uint64_t offset, void* data, size_t bytes);
  absl::Status Sync();  // fdatasync
  absl::Status Truncate(uint64_t bytes);
  absl::StatusOr<uint64_t> Size() const;

  // O_DIRECT in effect: false when not asked, or where the filesystem
  // refused it (tmpfs, some overlayfs) at open or at the first transfer.
  bool direct() const { return direct_.load(std::memory_order_relaxed); }
  const std::string& path() const { return path_; }

 private:
  enum class Op { kRead, kWrite };
  DirectFile(std::string path, int buffered_fd, int direct_fd);
  void Close();
  absl::Status Transfer(Op op, uint64_t offset, char* data, size_t bytes);
  // Moves [offset, offset + bytes) through `fd`; returns how much moved
  // before the file ended (reads) or the direct descriptor gave up.
  absl::StatusOr<size_t> TransferOn(int fd, Op op, uint64_t offset, char* data, size_t bytes);
  // The same through the buffered descriptor, all of it or an error.
  absl::Status TransferBuffered(Op op, uint64_t offset, char* data, size_t bytes);

  std::string path_;
  int buffered_fd_ = -1;  // always open; unaligned parts, sync, truncate
  int direct_fd_ = -1;    // O_DIRECT, when the filesystem took it
  std::atomic<bool> direct_{false};
};

// Host memory aligned for O_DIRECT (posix_memalign), freed by the deleter.
struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<std::byte[], AlignedFree>;

// `bytes` rounded up to DirectFile::kAlignment; ResourceExhausted when the
// host has no memory for it.
absl::StatusOr<AlignedBuffer> AllocateAlignedBuffer(size_t bytes);

constexpr uint64_t RoundUpToAlignment(uint64_t bytes) {
  return (bytes + DirectFile::kAlignment - 1) / DirectFile::kAlignment * DirectFile::kAlignment;
}

}  // namespace zero
