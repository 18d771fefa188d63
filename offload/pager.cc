#include "offload/pager.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "base/units.h"

namespace zero {
namespace {

// Keeps only events whose work may still be running: a tensor acquired
// thousands of times must not accumulate thousands of events.
void AddPending(std::vector<std::shared_ptr<Event>>& events, std::shared_ptr<Event> event) {
  events.erase(std::remove_if(events.begin(), events.end(),
                              [](const std::shared_ptr<Event>& e) { return e->Query(); }),
               events.end());
  if (event != nullptr && !event->Query()) events.push_back(std::move(event));
}

}  // namespace

std::string_view ResidencyName(Residency residency) {
  switch (residency) {
    case Residency::kDevice: return "device";
    case Residency::kHost: return "host";
    case Residency::kNvme: return "nvme";
  }
  return "?";
}

absl::StatusOr<std::unique_ptr<Pager>> Pager::Create(DeviceSystem* system, int device,
                                                     PinnedHostPool* host_pool, Options options) {
  if (system == nullptr || host_pool == nullptr) {
    return absl::InvalidArgumentError("pager: needs a device system and a host pool");
  }
  if (device < 0 || device >= system->device_count()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "pager: no device %d (there are %d)", device, system->device_count()));
  }
  if (options.budget_bytes == 0) {
    return absl::InvalidArgumentError("pager: the device budget must be more than zero bytes");
  }
  if (host_pool->has_bytes() != system->backend().has_bytes()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "pager: host pool (%s) and %s devices disagree on having bytes",
        std::string(host_pool->source_name()), std::string(DeviceKindName(system->kind()))));
  }
  std::unique_ptr<NvmeStore> nvme;
  std::unique_ptr<SerialQueue> io;
  if (!options.nvme_path.empty()) {
    if (options.host_budget_bytes == 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "pager: with an NVMe folder (%s) the host staging budget must be more than zero bytes",
          options.nvme_path));
    }
    // One file per pager: ranks and pagers of one process never share one.
    static std::atomic<int> instances{0};
    const std::string name =
        absl::StrFormat("zero-pager-%d-device%d-%d.swap", getpid(), device, instances++);
    ASSIGN_OR_RETURN(nvme, NvmeStore::Create(options.nvme_path, name,
                                             {.has_bytes = system->backend().has_bytes(),
                                              .direct = options.direct_io,
                                              .write_fault = options.nvme_write_fault,
                                              .read_fault = options.nvme_read_fault}));
    ASSIGN_OR_RETURN(io, SerialQueue::Create({}, "zero-io"));
  }
  ASSIGN_OR_RETURN(Stream* in, system->CreateStream(device));
  ASSIGN_OR_RETURN(Stream* out, system->CreateStream(device));
  return std::unique_ptr<Pager>(new Pager(system, device, host_pool, in, out,
                                          options.budget_bytes, std::move(nvme), std::move(io),
                                          options.host_budget_bytes));
}

Pager::Pager(DeviceSystem* system, int device, PinnedHostPool* host_pool, Stream* in,
             Stream* out, size_t budget, std::unique_ptr<NvmeStore> nvme,
             std::unique_ptr<SerialQueue> io, size_t host_budget)
    : system_(system),
      device_(device),
      device_pool_(system->pool(device)),
      host_pool_(host_pool),
      in_(in),
      out_(out),
      has_bytes_(system->backend().has_bytes()),
      nvme_(std::move(nvme)),
      io_(std::move(io)),
      host_budget_(nvme_ != nullptr ? host_budget : 0),
      budget_(budget) {
  stats_.budget = budget;
  stats_.host_budget = host_budget_;
}

Pager::~Pager() {
  MutexLock lock(mu_);
  (void)in_->Synchronize();
  (void)out_->Synchronize();
  for (auto& [id, t] : tensors_) {
    if (t.reading.valid()) t.reading.wait();  // it writes t.host
    for (const auto& e : t.uses) (void)e->Synchronize();
    if (t.device != nullptr) (void)device_pool_.Deallocate(t.device, t.bytes, out_);
    if (t.host != nullptr) (void)host_pool_->Deallocate(t.host, StagingBytes(t), nullptr);
  }
}

absl::StatusOr<Pager::Tensor*> Pager::Find(TensorHandle handle) {
  auto it = tensors_.find(handle.id);
  if (it == tensors_.end()) {
    return absl::NotFoundError(absl::StrFormat(
        "pager: tensor handle %d is not registered (never was, or unregistered since)",
        handle.id));
  }
  return &it->second;
}

absl::Status Pager::CheckNotHeld(const Tensor& t, absl::string_view verb) const {
  if (t.holds == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrFormat("pager: cannot %s tensor '%s' while it is held (%d pins)",
                      std::string(verb), t.name, t.holds));
}

absl::StatusOr<TensorHandle> Pager::Register(size_t bytes, Tag tag, std::string name) {
  MutexLock lock(mu_);
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("pager: tensor '%s' has zero bytes", name));
  }
  if (bytes > budget_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "pager: tensor '%s' (%s) is larger than the whole device budget (%s)", name,
        FormatBytes(bytes), FormatBytes(budget_)));
  }
  // Padded wraps past kMaxSlotBytes; halving the budget cannot.
  if (nvme_ != nullptr &&
      (bytes > NvmeStore::kMaxSlotBytes || NvmeStore::Padded(bytes) > host_budget_ / 2)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "pager: tensor '%s' (%s) is larger than half the host staging budget (%s)", name,
        FormatBytes(bytes), FormatBytes(host_budget_)));
  }
  Tensor t;
  t.name = std::move(name);
  t.bytes = bytes;
  t.tag = tag;
  if (nvme_ != nullptr) {
    ASSIGN_OR_RETURN(t.slot, nvme_->Allocate(bytes));
  } else {
    // The first stream to touch a home block is the page-in stream (it
    // reads it), so allocating on it orders the block after its previous owner.
    ASSIGN_OR_RETURN(t.host, host_pool_->Allocate(bytes, tag, in_));
  }
  const uint64_t id = next_id_++;
  (nvme_ != nullptr ? stats_.nvme_bytes : stats_.host_bytes) += bytes;
  tensors_[id] = std::move(t);
  ++stats_.tensors;
  return TensorHandle{id};
}

absl::Status Pager::Unregister(TensorHandle handle) {
  MutexLock lock(mu_);
  ASSIGN_OR_RETURN(Tensor* t, Find(handle));
  RETURN_IF_ERROR(CheckNotHeld(*t, "unregister"));
  (void)FinishRead(*t);  // its outcome no longer matters, its block does
  // Both blocks are freed on the page-out stream once it has waited for
  // every copy and use, so whoever gets them next waits for all of that.
  RETURN_IF_ERROR(OrderOutAfterUses(*t));
  const Residency from = Where(*t);
  if (t->device != nullptr) RETURN_IF_ERROR(device_pool_.Deallocate(t->device, t->bytes, out_));
  t->device = nullptr;
  if (t->host != nullptr) {
    RETURN_IF_ERROR(host_pool_->Deallocate(t->host, StagingBytes(*t), out_));
    if (nvme_ != nullptr) stats_.staging_bytes -= StagingBytes(*t);
  }
  t->host = nullptr;
  if (nvme_ != nullptr) RETURN_IF_ERROR(nvme_->Free(t->slot));
  BytesIn(from) -= t->bytes;
  tensors_.erase(handle.id);
  --stats_.tensors;
  return absl::OkStatus();
}

absl::StatusOr<Pager::Pin> Pager::Acquire(TensorHandle handle, Stream* stream, Access access) {
  if (stream != nullptr && stream->device() != device_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "pager: acquire on a stream of device %d; the pager serves device %d", stream->device(),
        device_));
  }
  AwaitRead(handle);  // a prefetched read the page-in would wait for under the lock
  std::vector<std::shared_ptr<Event>> after;  // the copy in, earlier holders' work
  void* data = nullptr;
  size_t bytes = 0;
  {
    MutexLock lock(mu_);
    ASSIGN_OR_RETURN(Tensor* t, Find(handle));
    if (t->device == nullptr) RETURN_IF_ERROR(PageInLocked(*t, 0));
    if (t->holds++ == 0) stats_.held_bytes += t->bytes;
    if (access == Access::kReadWrite) t->dirty = true;
    t->last_use = ++clock_;
    if (in_step_) recording_.push_back(handle.id);
    ++position_;
    after = t->uses;
    if (t->ready != nullptr) after.push_back(t->ready);
    data = t->device;
    bytes = t->bytes;
  }
  // Waiting outside the lock: other threads keep paging meanwhile, and the
  // hold keeps this tensor where it is.
  for (const auto& event : after) {
    if (event->Query()) continue;
    absl::Status waited = stream != nullptr ? stream->Wait(event) : event->Synchronize();
    if (!waited.ok()) {
      (void)Release(handle, nullptr);
      return waited;
    }
  }
  return Pin(this, handle, data, bytes, stream);
}

absl::Status Pager::Release(TensorHandle handle, Stream* stream) {
  std::shared_ptr<Event> used;
  absl::Status status;
  if (stream != nullptr) {
    absl::StatusOr<std::shared_ptr<Event>> event = stream->Record();
    // Without an event the only safe order left is to wait for the stream.
    if (event.ok()) used = *std::move(event);
    else status = stream->Synchronize();
  }
  MutexLock lock(mu_);
  auto it = tensors_.find(handle.id);
  if (it == tensors_.end()) {
    return absl::InternalError("pager: released a tensor that is not registered");
  }
  Tensor& t = it->second;
  AddPending(t.uses, std::move(used));
  if (--t.holds == 0) stats_.held_bytes -= t.bytes;
  t.last_use = ++clock_;
  return status;
}

absl::Status Pager::PageIn(TensorHandle handle) {
  AwaitRead(handle);
  MutexLock lock(mu_);
  ASSIGN_OR_RETURN(Tensor* t, Find(handle));
  if (t->device != nullptr) return absl::OkStatus();
  return PageInLocked(*t, 0);
}

absl::Status Pager::PageOut(TensorHandle handle, Residency to) {
  if (to == Residency::kDevice || (to == Residency::kNvme && nvme_ == nullptr)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "pager: cannot page out to %s%s", std::string(ResidencyName(to)),
        to == Residency::kNvme ? " (this pager has no NVMe folder)" : ""));
  }
  MutexLock lock(mu_);
  ASSIGN_OR_RETURN(Tensor* t, Find(handle));
  RETURN_IF_ERROR(CheckNotHeld(*t, "page out"));
  if (t->device != nullptr) RETURN_IF_ERROR(PageOutLocked(*t, 0));
  if (to == Residency::kNvme && t->host != nullptr) RETURN_IF_ERROR(WriteBack(*t));
  return absl::OkStatus();
}

absl::StatusOr<int> Pager::Prefetch(int n) {
  MutexLock lock(mu_);
  if (n <= 0 || forecast_.empty()) return 0;
  int started = 0;
  for (uint64_t id : forecast_.Upcoming(position_, n)) {
    auto it = tensors_.find(id);
    if (it == tensors_.end() || it->second.device != nullptr) continue;
    Tensor& t = it->second;
    // Still reading: the next Prefetch or the Acquire copies it up.
    if (t.reading.valid() &&
        t.reading.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      continue;
    }
    // Evict only what is needed later than this one; otherwise a prefetch
    // could push out a tensor the next acquire wants.
    const bool in_file_only = nvme_ != nullptr && t.host == nullptr && nvme_->written(t.slot);
    absl::Status status = in_file_only ? StartRead(t, NextUse(id) + 1)
                                       : PageInLocked(t, NextUse(id) + 1);
    if (absl::IsResourceExhausted(status)) continue;  // a smaller later one may fit
    RETURN_IF_ERROR(status);
    ++started;
    ++(in_file_only ? stats_.read_aheads : stats_.prefetches);
  }
  return started;
}

absl::Status Pager::BeginStep() {
  MutexLock lock(mu_);
  if (in_step_) return absl::FailedPreconditionError("pager: BeginStep inside a step");
  in_step_ = true;
  recording_.clear();
  position_ = 0;
  return absl::OkStatus();
}

absl::Status Pager::EndStep() {
  MutexLock lock(mu_);
  if (!in_step_) return absl::FailedPreconditionError("pager: EndStep without BeginStep");
  in_step_ = false;
  forecast_ = AccessOrder(std::move(recording_));
  recording_.clear();
  return absl::OkStatus();
}

absl::Status Pager::SetBudget(size_t budget_bytes) {
  MutexLock lock(mu_);
  if (budget_bytes == 0) {
    return absl::InvalidArgumentError("pager: the device budget must be more than zero bytes");
  }
  if (budget_bytes < stats_.held_bytes) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "pager: cannot set the device budget to %s: held tensors alone use %s",
        FormatBytes(budget_bytes), FormatBytes(stats_.held_bytes)));
  }
  // Held bytes fit, so while over budget an unheld resident tensor exists.
  while (stats_.device_bytes > budget_bytes) RETURN_IF_ERROR(Evict(0));
  budget_ = budget_bytes;
  stats_.budget = budget_bytes;
  return absl::OkStatus();
}

absl::StatusOr<Residency> Pager::residency(TensorHandle handle) const {
  MutexLock lock(mu_);
  auto it = tensors_.find(handle.id);
  if (it == tensors_.end()) {
    return absl::NotFoundError(
        absl::StrFormat("pager: tensor handle %d is not registered", handle.id));
  }
  return Where(it->second);
}

Residency Pager::Where(const Tensor& t) {
  if (t.device != nullptr) return Residency::kDevice;
  return t.host != nullptr ? Residency::kHost : Residency::kNvme;
}

size_t& Pager::BytesIn(Residency residency) {
  switch (residency) {
    case Residency::kDevice: return stats_.device_bytes;
    case Residency::kHost: return stats_.host_bytes;
    case Residency::kNvme: break;
  }
  return stats_.nvme_bytes;
}

void Pager::Recount(const Tensor& t, Residency from) {
  BytesIn(from) -= t.bytes;
  BytesIn(Where(t)) += t.bytes;
  stats_.peak_device_bytes = std::max(stats_.peak_device_bytes, stats_.device_bytes);
}

PagerStats Pager::stats() const {
  MutexLock lock(mu_);
  PagerStats stats = stats_;
  if (nvme_ != nullptr) {
    const NvmeStoreStats file = nvme_->stats();
    stats.file_reads = file.reads;
    stats.file_writes = file.writes;
    stats.bytes_read = file.bytes_read;
    stats.bytes_written = file.bytes_written;
  }
  return stats;
}

absl::Status Pager::Synchronize() {
  RETURN_IF_ERROR(in_->Synchronize());
  return out_->Synchronize();
}

// ---- eviction ---------------------------------------------------------------

size_t Pager::NextUse(uint64_t id) const { return forecast_.NextUse(id, position_); }

// Belady: the resident, unheld tensor used furthest ahead in the forecast
// (never again counts as furthest); ties, and every tensor when there is no
// forecast, go to the least recently used. Linear in the tensors: eviction is
// rare next to the copy it causes.
Pager::Tensor* Pager::PickVictim(size_t min_next_use) {
  // Called by PickFurthest, under mu_ as this is.
  auto next_use = [this](uint64_t id, const Tensor& t)
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> std::optional<size_t> {
    if (t.device == nullptr || t.holds > 0) return std::nullopt;
    return NextUse(id);
  };
  return PickFurthest(min_next_use, next_use);
}

Pager::Tensor* Pager::PickFurthest(size_t min_next_use, NextUseFn next_use) {
  Tensor* victim = nullptr;
  size_t victim_next = 0;
  for (auto& [id, t] : tensors_) {
    const std::optional<size_t> use = next_use(id, t);
    if (!use.has_value() || *use < min_next_use) continue;
    const size_t next = *use;
    if (victim == nullptr || next > victim_next ||
        (next == victim_next && t.last_use < victim->last_use)) {
      victim = &t;
      victim_next = next;
    }
  }
  return victim;
}

size_t Pager::EvictableBytes(size_t min_next_use) const {
  size_t bytes = 0;
  for (const auto& [id, t] : tensors_) {
    if (t.device != nullptr && t.holds == 0 && NextUse(id) >= min_next_use) bytes += t.bytes;
  }
  return bytes;
}

absl::Status Pager::Evict(size_t min_next_use) {
  Tensor* victim = PickVictim(min_next_use);
  if (victim == nullptr) {
    return absl::ResourceExhaustedError("pager: no unheld tensor left to evict");
  }
  RETURN_IF_ERROR(PageOutLocked(*victim, min_next_use));
  ++stats_.evictions;
  return absl::OkStatus();
}

// Checks that enough can be evicted before evicting anything, so a request
// that cannot be met changes nothing.
absl::Status Pager::MakeRoom(const Tensor& t, size_t min_next_use) {
  if (t.bytes > budget_) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "pager: tensor '%s' (%s) is larger than the whole device budget (%s)", t.name,
        FormatBytes(t.bytes), FormatBytes(budget_)));
  }
  const size_t free = budget_ - stats_.device_bytes;
  if (free >= t.bytes) return absl::OkStatus();
  if (free + EvictableBytes(min_next_use) < t.bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "pager: no room for tensor '%s' (%s) on device %d: budget %s, %s resident of which "
        "%s held, %s evictable",
        t.name, FormatBytes(t.bytes), device_, FormatBytes(budget_),
        FormatBytes(stats_.device_bytes), FormatBytes(stats_.held_bytes),
        FormatBytes(EvictableBytes(min_next_use))));
  }
  while (budget_ - stats_.device_bytes < t.bytes) RETURN_IF_ERROR(Evict(min_next_use));
  return absl::OkStatus();
}

// The budget may allow what the device pool cannot give (other users of the
// device, fragmentation): then evict more and retry while anything is left.
absl::StatusOr<void*> Pager::AllocateDevice(const Tensor& t, size_t min_next_use) {
  while (true) {
    absl::StatusOr<void*> block = device_pool_.Allocate(t.bytes, t.tag, in_);
    if (block.ok() || !absl::IsResourceExhausted(block.status())) return block;
    if (!Evict(min_next_use).ok()) return block.status();
  }
}

// ---- moves --------------------------------------------------------------------

absl::Status Pager::PageInLocked(Tensor& t, size_t min_next_use) {
  // Evictions on the way need staging blocks too: never this tensor's
  // (its read ahead would be written back and read again).
  moving_ = &t;
  absl::Status moved = MakeRoom(t, min_next_use);
  if (moved.ok()) moved = MoveIn(t, min_next_use);
  moving_ = nullptr;
  return moved;
}

absl::Status Pager::MoveIn(Tensor& t, size_t min_next_use) {
  if (nvme_ != nullptr) RETURN_IF_ERROR(StageIn(t, min_next_use));
  const Residency from = Where(t);
  ASSIGN_OR_RETURN(void* device, AllocateDevice(t, min_next_use));
  const bool copy = has_bytes_ && t.host_valid;
  absl::Status status;
  if (copy && t.ready != nullptr && !t.ready->Query()) status = in_->Wait(t.ready);
  if (status.ok() && copy) status = in_->Copy(device, t.host, t.bytes);
  // Recorded even without a copy: acquirers wait on it, which orders them
  // after whatever the pool made the page-in stream wait for on this block.
  absl::StatusOr<std::shared_ptr<Event>> ready =
      status.ok() ? in_->Record() : absl::StatusOr<std::shared_ptr<Event>>(status);
  if (!ready.ok()) {
    (void)device_pool_.Deallocate(device, t.bytes, in_);
    return ready.status();
  }
  t.ready = *std::move(ready);
  t.device = device;
  t.dirty = false;
  t.uses.clear();
  Recount(t, from);  // resident now, whatever freeing the staging says
  ++stats_.page_ins;
  if (copy) stats_.bytes_paged_in += t.bytes;
  // The file holds what the staging block does: it goes back behind the copy.
  if (nvme_ != nullptr && t.host != nullptr && !t.host_dirty) {
    RETURN_IF_ERROR(FreeStaging(t, in_));
  }
  return absl::OkStatus();
}

absl::Status Pager::OrderOutAfterUses(Tensor& t) {
  AddPending(t.uses, nullptr);  // drops finished ones
  for (const auto& e : t.uses) RETURN_IF_ERROR(out_->Wait(e));
  if (t.ready != nullptr && !t.ready->Query()) RETURN_IF_ERROR(out_->Wait(t.ready));
  return absl::OkStatus();
}

absl::Status Pager::PageOutLocked(Tensor& t, size_t min_next_use) {
  RETURN_IF_ERROR(OrderOutAfterUses(t));
  const Residency from = Where(t);
  if (nvme_ != nullptr && t.dirty) {
    if (t.host == nullptr) RETURN_IF_ERROR(AllocateStaging(t, min_next_use));
    t.host_dirty = true;  // also on meta: the file's books count the write-back
  }
  const bool copy = has_bytes_ && t.dirty;
  if (copy) {
    RETURN_IF_ERROR(out_->Copy(t.host, t.device, t.bytes));
    ASSIGN_OR_RETURN(t.ready, out_->Record());
    t.host_valid = true;
    stats_.bytes_paged_out += t.bytes;
  }
  // Freed on the page-out stream: the pool hands the block to the next
  // page-in only behind this stream's copy (and the uses it waited for).
  RETURN_IF_ERROR(device_pool_.Deallocate(t.device, t.bytes, out_));
  t.device = nullptr;
  t.dirty = false;
  t.uses.clear();
  Recount(t, from);
  ++stats_.page_outs;
  return absl::OkStatus();
}

// ---- Pin ---------------------------------------------------------------------

Pager::Pin& Pager::Pin::operator=(Pin&& other) noexcept {
  if (this != &other) {
    (void)Release();
    pager_ = std::exchange(other.pager_, nullptr);
    handle_ = other.handle_;
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = other.bytes_;
    stream_ = other.stream_;
  }
  return *this;
}

absl::Status Pager::Pin::Release() {
  if (pager_ == nullptr) return absl::OkStatus();
  Pager* pager = std::exchange(pager_, nullptr);
  data_ = nullptr;
  return pager->Release(handle_, stream_);
}

}  // namespace zero
