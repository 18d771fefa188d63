// The pager's NVMe tier: host staging blocks between the device and the
// file, bounded by the host budget. A staging block newer than the file is
// written back before it is freed, so evicting from host memory never loses
// data; a failed write keeps the block (and the data) where it was.
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "base/units.h"
#include "offload/pager.h"

namespace zero {

size_t Pager::StagingBytes(const Tensor& t) const {
  return nvme_ != nullptr ? NvmeStore::Padded(t.bytes) : t.bytes;
}

// Furthest next use first, as on the device; a tensor on the device needs
// its host block least (its next use reads the device copy). A block still
// being read ahead only as a last resort: taking it waits for the read
// under the lock, then throws it away.
Pager::Tensor* Pager::PickStagingVictim(size_t min_next_use) {
  for (const bool reading_too : {false, true}) {
    Tensor* victim = PickFurthest(
        min_next_use,
        [&](uint64_t id, const Tensor& t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_)
            -> std::optional<size_t> {
          if (t.host == nullptr || &t == moving_ || (t.reading.valid() && !reading_too)) {
            return std::nullopt;
          }
          return t.device != nullptr ? AccessOrder::kNever : NextUse(id);
        });
    if (victim != nullptr) return victim;
  }
  return nullptr;
}

absl::Status Pager::AllocateStaging(Tensor& t, size_t min_next_use) {
  const size_t bytes = StagingBytes(t);
  while (stats_.staging_bytes + bytes > host_budget_) {
    Tensor* victim = PickStagingVictim(min_next_use);
    if (victim == nullptr) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "pager: no room to stage tensor '%s' (%s) in host memory: staging budget %s, %s "
          "staged, none of it can be written back now",
          t.name, FormatBytes(bytes), FormatBytes(host_budget_),
          FormatBytes(stats_.staging_bytes)));
    }
    RETURN_IF_ERROR(WriteBack(*victim));
  }
  // The host thread fills it (file read) or a copy stream does after this.
  ASSIGN_OR_RETURN(t.host, host_pool_->Allocate(bytes, t.tag, nullptr, NvmeStore::kAlignment));
  // The padding goes to the file too: defined bytes, not stale ones.
  if (has_bytes_ && bytes > t.bytes) {
    std::memset(static_cast<char*>(t.host) + t.bytes, 0, bytes - t.bytes);
  }
  t.host_valid = false;
  t.host_dirty = false;
  stats_.staging_bytes += bytes;
  stats_.peak_staging_bytes = std::max(stats_.peak_staging_bytes, stats_.staging_bytes);
  return absl::OkStatus();
}

absl::Status Pager::FreeStaging(Tensor& t, Stream* stream) {
  RETURN_IF_ERROR(host_pool_->Deallocate(t.host, StagingBytes(t), stream));
  stats_.staging_bytes -= StagingBytes(t);
  t.host = nullptr;
  t.host_valid = false;
  t.host_dirty = false;
  return absl::OkStatus();
}

absl::Status Pager::StageIn(Tensor& t, size_t min_next_use) {
  // A read ahead that failed freed its block: read again, and say why.
  (void)FinishRead(t);
  if (t.device != nullptr || t.host != nullptr || !nvme_->written(t.slot)) {
    return absl::OkStatus();  // a nearer copy, or no data yet
  }
  const Residency from = Where(t);
  RETURN_IF_ERROR(AllocateStaging(t, min_next_use));
  absl::Status read = nvme_->Read(t.slot, t.host);
  if (!read.ok()) {
    (void)FreeStaging(t, nullptr);
    return Annotate(read, absl::StrFormat("pager: paging in tensor '%s'", t.name));
  }
  t.host_valid = true;
  Recount(t, from);
  return absl::OkStatus();
}

absl::Status Pager::StartRead(Tensor& t, size_t min_next_use) {
  const Residency from = Where(t);
  RETURN_IF_ERROR(AllocateStaging(t, min_next_use));
  NvmeStore* store = nvme_.get();
  // What FinishRead finds if the request never assigns it (it threw).
  t.read_status = std::make_shared<absl::Status>(
      absl::InternalError("the read ahead did not finish (it threw)"));
  t.reading = io_->Submit([store, slot = t.slot, host = t.host, out = t.read_status] {
                    *out = store->Read(slot, host);
                    return absl::OkStatus();
                  }).share();
  Recount(t, from);
  return absl::OkStatus();
}

absl::Status Pager::FinishRead(Tensor& t) {
  if (!t.reading.valid()) return absl::OkStatus();
  std::exchange(t.reading, {}).wait();
  absl::Status read = std::move(*std::exchange(t.read_status, nullptr));
  if (read.ok()) {
    t.host_valid = true;
    return read;
  }
  const Residency from = Where(t);
  (void)FreeStaging(t, nullptr);  // the file still holds the tensor
  Recount(t, from);
  ++stats_.failed_read_aheads;
  return Annotate(read, absl::StrFormat("pager: reading ahead tensor '%s'", t.name));
}

void Pager::AwaitRead(TensorHandle handle) {
  std::shared_future<absl::Status> reading;
  {
    MutexLock lock(mu_);
    auto it = tensors_.find(handle.id);
    if (it == tensors_.end()) return;
    reading = it->second.reading;
  }
  if (reading.valid()) reading.wait();
}

absl::Status Pager::WriteBack(Tensor& t) {
  // Read ahead but not used: the file holds it; a failed read freed the block.
  if (t.reading.valid() && !FinishRead(t).ok()) return absl::OkStatus();
  // The last copy into (or out of) the block must be done before the host
  // reads it for the file or hands it back.
  if (t.ready != nullptr && !t.ready->Query()) RETURN_IF_ERROR(t.ready->Synchronize());
  if (t.host_dirty) {
    RETURN_IF_ERROR(Annotate(nvme_->Write(t.slot, t.host),
                             absl::StrFormat("pager: writing back tensor '%s'", t.name)));
  }
  const Residency from = Where(t);
  RETURN_IF_ERROR(FreeStaging(t, nullptr));
  Recount(t, from);
  return absl::OkStatus();
}

}  // namespace zero
