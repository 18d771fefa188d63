// The NVMe tier's file: one file on local storage holding fixed slots, one
// per tensor, at kAlignment-aligned offsets so that every read and write can
// go around the page cache (O_DIRECT; buffered where the filesystem refuses).
//
// Slots are carved first-fit from a free list (freed slots coalesce; the
// file never moves a slot). Each written slot keeps a CRC-32C in memory, so a
// file truncated or overwritten underneath is a DataLoss error on read, never
// silent garbage. On meta devices (no bytes) there is no file: the same books.
//
// Thread-safe: the books are under a mutex; reads and writes of different
// slots run concurrently, outside it (one caller per slot at a time). The
// file is created new by Create (never an existing one) and removed by the
// destructor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/direct_file.h"
#include "base/mutex.h"

namespace zero {

struct NvmeStoreOptions {
  bool has_bytes = true;  // false: books only, no file (meta devices)
  bool direct = true;     // O_DIRECT where the filesystem allows it
  // Test-only fault injection: consulted before each slot write (from
  // whichever threads write, maybe at once); an error fails that write as
  // the disk would.
  std::function<absl::Status(uint64_t offset, size_t bytes)> write_fault;
  // The same before each slot read (test-only: to fail or hold a read).
  std::function<absl::Status(uint64_t offset, size_t bytes)> read_fault;
};

struct NvmeStoreStats {
  // The file's extent: the highest slot end, or more while a freed tail is
  // kept (a tail no longer than the rest stays for the next writes: the
  // file spans at most twice what it holds below the tail).
  uint64_t file_bytes = 0;
  uint64_t slot_bytes = 0;       // padded bytes of live slots
  uint64_t reads = 0, writes = 0;
  uint64_t bytes_read = 0, bytes_written = 0;  // payload, not padding
};

class NvmeStore {
 public:
  static constexpr size_t kAlignment = DirectFile::kAlignment;
  // The largest slot: a file offset (off_t) must hold its end.
  static constexpr size_t kMaxSlotBytes = size_t{1} << 62;
  // What a slot of `bytes` (at most kMaxSlotBytes) occupies, and what a
  // buffer given to Read/Write must span (and be aligned to kAlignment).
  static constexpr size_t Padded(size_t bytes) {
    return (bytes + kAlignment - 1) / kAlignment * kAlignment;
  }

  // Creates `folder`/`file_name`, or `file_name`.1, .2, ... where that
  // exists (another process's, or a stale one: never truncated). Errors
  // name the path and why (a folder that is missing or not writable).
  static absl::StatusOr<std::unique_ptr<NvmeStore>> Create(const std::string& folder,
                                                           const std::string& file_name,
                                                           NvmeStoreOptions options = {});
  ~NvmeStore();
  NvmeStore(const NvmeStore&) = delete;
  NvmeStore& operator=(const NvmeStore&) = delete;

  // A slot for `bytes` (> 0); its offset names it. Takes no disk space
  // until written.
  absl::StatusOr<uint64_t> Allocate(size_t bytes);
  absl::Status Free(uint64_t slot);

  // Writes the slot's `bytes` from `data` (aligned, Padded(bytes) readable;
  // the padding is written too). On error the slot holds nothing valid.
  // `crc`: the caller's CRC-32C of those bytes, computed while they were
  // still in cache (else the store reads them once more to compute it).
  absl::Status Write(uint64_t slot, const void* data, std::optional<uint32_t> crc = std::nullopt);
  // Reads the slot into `data` (aligned, Padded(bytes) writable) and checks
  // it: FailedPrecondition if never written (or its last write failed),
  // DataLoss if the file was truncated or changed underneath.
  absl::Status Read(uint64_t slot, void* data);
  // Read in two steps, so that an I/O thread can go on to its next request
  // while another thread checks: ReadUnchecked reads (its errors are
  // Read's) and returns the CRC-32C the bytes must have; CheckRead(slot,
  // data, that CRC) is the check (DataLoss as above). Use nothing read
  // before CheckRead says OK.
  absl::StatusOr<uint32_t> ReadUnchecked(uint64_t slot, void* data);
  absl::Status CheckRead(uint64_t slot, const void* data, uint32_t expected);
  bool written(uint64_t slot) const;

  const std::string& path() const { return path_; }
  bool direct() const;
  NvmeStoreStats stats() const;

 private:
  struct Slot {
    size_t bytes = 0;
    std::optional<uint32_t> crc;  // set once a write succeeded
  };

  NvmeStore(std::string path, std::optional<DirectFile> file, NvmeStoreOptions options);
  absl::StatusOr<Slot*> Find(uint64_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string Where(uint64_t slot, size_t bytes) const;

  const std::string path_;
  std::optional<DirectFile> file_;  // empty without bytes
  const NvmeStoreOptions options_;

  mutable Mutex mu_;
  std::map<uint64_t, Slot> slots_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, uint64_t> free_ ABSL_GUARDED_BY(mu_);  // offset -> padded length
  uint64_t end_ ABSL_GUARDED_BY(mu_) = 0;        // highest live or free-listed slot end
  uint64_t disk_end_ ABSL_GUARDED_BY(mu_) = 0;   // what the file may span on disk
  NvmeStoreStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zero
