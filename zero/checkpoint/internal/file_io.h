// The file operations checkpoints need, with errors that name the file and
// the system's reason.
//
// WriteFileAtomically (base/atomic_file.h) takes the whole contents at
// once; a data file is a rank's whole slice of the model states, which we
// never want in host memory at once, so AtomicFileWriter streams the same
// protocol: a temporary file in the same folder, fsync, rename, then fsync
// of the folder so the rename itself survives a crash. It writes through
// DirectFile: appends at 4 KiB-aligned offsets from aligned buffers go
// around the page cache (O_DIRECT), the rest buffered.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "base/direct_file.h"

namespace zero::checkpoint {

// Test-only fault injection, for crash-consistency tests: with a hook set,
// every step that changes the disk during a save calls it first, and an
// error it returns is that step's error (e.g. a full disk); it may also end
// the process there. Off by default; then each step costs one relaxed
// atomic load. The hook is called from every rank's thread at once.
enum class FileOp { kCreate, kWrite, kFsync, kRename, kSyncFolder };
using FaultHook = absl::Status (*)(FileOp op, std::string_view path);
void SetFaultHookForTesting(FaultHook hook);  // null: off
// What each step calls: OK when no hook is set.
absl::Status FaultPoint(FileOp op, std::string_view path);

class AtomicFileWriter {
 public:
  // Creates "<path>.tmp.<pid>"; `path` appears only at Commit.
  static absl::StatusOr<AtomicFileWriter> Open(const std::string& path);
  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&&) = delete;
  // Removes the temporary file unless committed.
  ~AtomicFileWriter();

  absl::Status Append(const void* data, size_t bytes);
  // The same when the caller already has Crc32c(data, bytes): the file's
  // CRC is extended by combining, so each byte is checksummed once.
  absl::Status Append(const void* data, size_t bytes, uint32_t data_crc);
  // fsync, rename into place, fsync the folder. The writer is spent after.
  absl::Status Commit();

  uint64_t bytes() const { return bytes_; }
  uint32_t crc32c() const { return crc_; }  // of everything appended

 private:
  AtomicFileWriter(std::string path, std::string tmp, DirectFile file);
  absl::Status Fail(absl::Status status);  // Discard, then `status`
  void Discard();                          // closes and unlinks the temporary

  std::string path_, tmp_;
  std::optional<DirectFile> file_;  // empty once committed or discarded
  uint64_t bytes_ = 0;
  uint32_t crc_ = 0;
};

// A file read at offsets (pread), closed on destruction. Move-only.
class RandomAccessFile {
 public:
  static absl::StatusOr<RandomAccessFile> Open(const std::string& path);
  RandomAccessFile(RandomAccessFile&& other) noexcept;
  RandomAccessFile& operator=(RandomAccessFile&&) = delete;
  ~RandomAccessFile();

  uint64_t size() const { return size_; }  // when opened
  const std::string& path() const { return path_; }
  // Exactly `bytes` at `offset`; DataLoss when the file ends first.
  absl::Status ReadAt(uint64_t offset, void* dst, size_t bytes) const;

 private:
  RandomAccessFile(std::string path, int fd, uint64_t size);
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// WriteFileAtomically's protocol through AtomicFileWriter (so faults reach
// it) plus the folder's fsync: `contents` at `path`, or the old file intact.
absl::Status WriteWholeFileAtomically(const std::string& path, std::string_view contents);

// NotFound when `path` does not exist.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);
bool FileExists(const std::string& path);
// Makes renames and creations inside folder `dir` durable.
absl::Status SyncDirectory(const std::string& dir);
// `path` and its missing parents (mkdir -p).
absl::Status MakeDirectories(const std::string& path);

}  // namespace zero::checkpoint
