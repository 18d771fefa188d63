#include "offload/internal/nvme_store.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/crc32c.h"
#include "base/status_macros.h"
#include "base/units.h"

namespace zero {

namespace {
constexpr int kNameAttempts = 64;  // names tried before giving up
}  // namespace

absl::StatusOr<std::unique_ptr<NvmeStore>> NvmeStore::Create(const std::string& folder,
                                                             const std::string& file_name,
                                                             NvmeStoreOptions options) {
  if (folder.empty()) {
    return absl::InvalidArgumentError("nvme store: no folder given for the offload file");
  }
  std::string path = folder + "/" + file_name;
  std::optional<DirectFile> file;
  // Never another's file: processes in other PID namespaces (a container
  // per card) may share a pid, and so a name, over one mounted folder.
  for (int attempt = 1; options.has_bytes && !file.has_value(); ++attempt) {
    absl::StatusOr<DirectFile> opened =
        DirectFile::Open(path, FileMode::kCreateNew, {.direct = options.direct});
    if (absl::IsAlreadyExists(opened.status()) && attempt < kNameAttempts) {
      path = absl::StrFormat("%s/%s.%d", folder, file_name, attempt);
      continue;
    }
    if (!opened.ok()) {
      return Annotate(opened.status(),
                      absl::StrFormat("nvme store: cannot create the offload file %s", path));
    }
    file = *std::move(opened);
  }
  return std::unique_ptr<NvmeStore>(new NvmeStore(path, std::move(file), std::move(options)));
}

NvmeStore::NvmeStore(std::string path, std::optional<DirectFile> file, NvmeStoreOptions options)
    : path_(std::move(path)), file_(std::move(file)), options_(std::move(options)) {}

NvmeStore::~NvmeStore() {
  if (!file_.has_value()) return;
  file_.reset();
  (void)unlink(path_.c_str());
}

bool NvmeStore::direct() const { return file_.has_value() && file_->direct(); }

std::string NvmeStore::Where(uint64_t slot, size_t bytes) const {
  return absl::StrFormat("nvme store %s: slot at offset %d (%s)", path_, slot,
                         FormatBytes(bytes));
}

absl::StatusOr<NvmeStore::Slot*> NvmeStore::Find(uint64_t slot) {
  auto it = slots_.find(slot);
  if (it == slots_.end()) {
    return absl::NotFoundError(
        absl::StrFormat("nvme store %s: no slot at offset %d", path_, slot));
  }
  return &it->second;
}

absl::StatusOr<uint64_t> NvmeStore::Allocate(size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("nvme store: a slot of zero bytes");
  // Past the limit Padded wraps (to 0 at 2^64: a slot sharing the next one's offset).
  if (bytes > kMaxSlotBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "nvme store %s: a slot of %d bytes is larger than a file can hold (%d)", path_, bytes,
        kMaxSlotBytes));
  }
  const uint64_t padded = Padded(bytes);
  MutexLock lock(mu_);
  if (end_ >= kMaxSlotBytes * 2 - padded) {  // the end must fit in off_t
    return absl::ResourceExhaustedError(absl::StrFormat(
        "nvme store %s: a slot of %d bytes past the file's %d would end past 2^63 - 1", path_, bytes,
        end_));
  }
  uint64_t offset = end_;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < padded) continue;
    offset = it->first;
    const uint64_t rest = it->second - padded;
    free_.erase(it);
    if (rest > 0) free_[offset + padded] = rest;
    break;
  }
  if (offset == end_) end_ += padded;
  slots_[offset].bytes = bytes;
  stats_.slot_bytes += padded;
  disk_end_ = std::max(disk_end_, end_);
  stats_.file_bytes = disk_end_;
  return offset;
}

absl::Status NvmeStore::Free(uint64_t slot) {
  MutexLock lock(mu_);
  ASSIGN_OR_RETURN(Slot * s, Find(slot));
  uint64_t offset = slot, length = Padded(s->bytes);
  slots_.erase(slot);
  stats_.slot_bytes -= length;
  // Coalesce with the free neighbours, so large slots can be carved again.
  auto next = free_.find(offset + length);
  if (next != free_.end()) {
    length += next->second;
    free_.erase(next);
  }
  auto prev = free_.lower_bound(offset);
  if (prev != free_.begin() && std::prev(prev)->first + std::prev(prev)->second == offset) {
    --prev;
    offset = prev->first;
    length += prev->second;
    free_.erase(prev);
  }
  if (offset + length == end_) {
    end_ = offset;  // the tail is free: the file's extent shrinks
  } else {
    free_[offset] = length;
  }
  // The disk gives the tail back too, else a store that once held a large
  // model keeps its bytes for life; but only a tail longer than the rest of
  // the file: a writer that puts each pass in fresh slots (the state file)
  // frees half the file every pass and reuses it the next, and truncating
  // that half made every other pass extend the file again (ext4 allocates
  // as O_DIRECT writes go past the end: the NVMe step went from 1.33 to
  // 1.47 of the disk's limit). Best effort: a refused truncate leaves the
  // books saying what the disk still holds, and a later free retries.
  if (disk_end_ - end_ > end_ && (!file_.has_value() || file_->Truncate(end_).ok())) {
    disk_end_ = end_;
  }
  stats_.file_bytes = disk_end_;
  return absl::OkStatus();
}

bool NvmeStore::written(uint64_t slot) const {
  MutexLock lock(mu_);
  auto it = slots_.find(slot);
  return it != slots_.end() && it->second.crc.has_value();
}

absl::Status NvmeStore::Write(uint64_t slot, const void* data, std::optional<uint32_t> given) {
  size_t bytes = 0;
  {
    MutexLock lock(mu_);
    ASSIGN_OR_RETURN(Slot * s, Find(slot));
    s->crc.reset();  // a failed write may leave the slot half old, half new
    bytes = s->bytes;
  }
  if (file_.has_value()) {
    absl::Status written = options_.write_fault ? options_.write_fault(slot, bytes)
                                                : absl::OkStatus();
    if (written.ok()) written = file_->WriteAt(slot, data, Padded(bytes));
    RETURN_IF_ERROR(Annotate(written, "writing " + Where(slot, bytes)));
  }
  const uint32_t crc = !file_.has_value() ? 0 : given.has_value() ? *given : Crc32c(data, bytes);
  MutexLock lock(mu_);
  ASSIGN_OR_RETURN(Slot * s, Find(slot));
  s->crc = crc;
  ++stats_.writes;
  stats_.bytes_written += bytes;
  return absl::OkStatus();
}

absl::Status NvmeStore::Read(uint64_t slot, void* data) {
  ASSIGN_OR_RETURN(const uint32_t expected, ReadUnchecked(slot, data));
  return CheckRead(slot, data, expected);
}

absl::StatusOr<uint32_t> NvmeStore::ReadUnchecked(uint64_t slot, void* data) {
  size_t bytes = 0;
  uint32_t expected = 0;
  {
    MutexLock lock(mu_);
    ASSIGN_OR_RETURN(Slot * s, Find(slot));
    bytes = s->bytes;
    if (!s->crc.has_value()) {
      return absl::FailedPreconditionError(
          "reading " + Where(slot, bytes) + ": it holds no data (never written, or its last "
          "write failed)");
    }
    expected = *s->crc;
  }
  if (options_.read_fault) RETURN_IF_ERROR(options_.read_fault(slot, bytes));
  if (file_.has_value()) {
    absl::Status read = file_->ReadAt(slot, data, Padded(bytes));
    if (!read.ok()) {
      return absl::DataLossError(absl::StrFormat(
          "reading %s: %s (was the file truncated underneath?)", Where(slot, bytes),
          read.message()));
    }
  }
  MutexLock lock(mu_);
  ++stats_.reads;
  stats_.bytes_read += bytes;
  return expected;
}

absl::Status NvmeStore::CheckRead(uint64_t slot, const void* data, uint32_t expected) {
  size_t bytes = 0;
  {
    MutexLock lock(mu_);
    ASSIGN_OR_RETURN(Slot * s, Find(slot));
    bytes = s->bytes;
  }
  if (!file_.has_value()) return absl::OkStatus();
  const uint32_t crc = Crc32c(data, bytes);
  if (crc == expected) return absl::OkStatus();
  return absl::DataLossError(
      absl::StrFormat("reading %s: CRC-32C %08x, written as %08x: the file was changed underneath",
                      Where(slot, bytes), crc, expected));
}

NvmeStoreStats NvmeStore::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

}  // namespace zero
