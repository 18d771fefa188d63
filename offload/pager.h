// The pager: registered tensors move between one device's pool and the pinned
// host pool, asynchronously, under a device budget.
//
// Every tensor has a home block in the PinnedHostPool for its whole life (so
// eviction never needs host memory it may not get); the device copy is a
// cache, and a clean one (acquired only for reading since its page-in) is
// dropped without a copy. With an NVMe folder (ZeRO-Infinity) the home is a
// slot of one file per pager instead, and host blocks are staging copies
// under a host budget: a page-in reads the file into a staging block and
// copies it up; a page-out copies down into one; staging blocks are written
// back (O_DIRECT) and freed, furthest next use first, to stay in the budget.
// Prefetch reads ahead from the file on the pager's I/O thread (one read at
// a time, in the recorded order) while the caller computes and the pager
// serves other threads; the next Prefetch that finds such a tensor read
// copies it up, or its Acquire does (waiting, outside the pager's lock,
// for a read still in flight). Other file reads and the write-backs that
// make room run on the calling thread under the lock. Copies run on two
// copy streams of the device, one per direction, so an eviction's copy-out
// overlaps the next copy-in and both overlap compute; Prefetch starts the
// next tensors' copies while the current ones are in use. Events order
// copies against the acquirers' streams.
//
// The pager never holds more than `budget_bytes` of device memory (tensor
// bytes). When a page-in needs room it evicts an unheld resident tensor: the
// one whose next use is furthest away in the access order recorded during the
// previous step (BeginStep/EndStep; Belady), least recently used when there
// is no record. Meta devices have no bytes: the same bookkeeping, no copies
// and no file.
//
// Thread-safe: several threads may acquire and release (different or the
// same) tensors. Errors leave the pager as it was, except that tensors it
// evicted on the way stay evicted. Destroy it after every Pin is released.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/mutex.h"
#include "base/serial_queue.h"
#include "memory/device_system.h"
#include "memory/stream.h"
#include "memory/tag.h"
#include "offload/host_pool.h"
#include "offload/internal/access_order.h"
#include "offload/internal/nvme_store.h"

namespace zero {

// Where a tensor's nearest copy lives: on the device, in host memory, or
// only in the pager's NVMe file (or nowhere yet: never written).
enum class Residency { kDevice, kHost, kNvme };
std::string_view ResidencyName(Residency residency);

// What an acquirer does with the device copy. kRead keeps it clean, so its
// eviction costs no copy back.
enum class Access { kReadWrite, kRead };

// Names one registered tensor. Ids are never reused, so a handle kept past
// Unregister is detected (NotFound), never confused with a newer tensor.
struct TensorHandle {
  uint64_t id = 0;  // 0: no tensor
  friend bool operator==(TensorHandle, TensorHandle) = default;
};

struct PagerOptions {
  size_t budget_bytes = 0;  // device bytes the pager may hold; must be > 0
  // The NVMe tier: a folder on local storage for the pager's file (created
  // there, removed with the pager). Empty: every tensor lives in host memory.
  std::string nvme_path;
  // With nvme_path: host staging bytes (padded to the file's alignment) the
  // pager may hold at once; at least twice the largest tensor.
  size_t host_budget_bytes = 0;
  bool direct_io = true;  // O_DIRECT where the filesystem allows it
  // Test-only: fails file writes on demand (see NvmeStoreOptions).
  std::function<absl::Status(uint64_t offset, size_t bytes)> nvme_write_fault;
  std::function<absl::Status(uint64_t offset, size_t bytes)> nvme_read_fault;  // reads, alike
};

struct PagerStats {
  size_t budget = 0;
  size_t device_bytes = 0, peak_device_bytes = 0;  // tensor bytes with a device copy
  size_t host_bytes = 0;                           // tensor bytes resident only on host
  size_t nvme_bytes = 0;                           // tensor bytes only in the file (or nowhere)
  // NVMe tier: host staging blocks (padded bytes) and their budget.
  size_t host_budget = 0, staging_bytes = 0, peak_staging_bytes = 0;
  uint64_t file_reads = 0, file_writes = 0;
  uint64_t bytes_read = 0, bytes_written = 0;  // file payload
  size_t held_bytes = 0;                           // device bytes held by a Pin
  uint64_t tensors = 0;
  // A page-in or page-out is a move; the bytes count only what was copied
  // (a clean page-out and the first page-in of a never-written tensor copy
  // nothing).
  uint64_t page_ins = 0, page_outs = 0;
  uint64_t bytes_paged_in = 0, bytes_paged_out = 0;
  uint64_t evictions = 0;   // page-outs the pager chose to make room
  uint64_t prefetches = 0;  // page-ins started by Prefetch
  // NVMe tier: file reads Prefetch started, and those that failed (dropped:
  // the Acquire read again).
  uint64_t read_aheads = 0, failed_read_aheads = 0;
};

class Pager {
 public:
  using Options = PagerOptions;
  class Pin;

  // Pages between `system`'s pool of `device` and `host_pool` (neither owned;
  // both must outlive the pager), and the NVMe file if options name a
  // folder (an error names it when it cannot be created). Creates its two
  // copy streams.
  static absl::StatusOr<std::unique_ptr<Pager>> Create(DeviceSystem* system, int device,
                                                       PinnedHostPool* host_pool,
                                                       Options options);
  // Waits for pending copies and uses, then frees every tensor's memory.
  ~Pager();
  Pager(const Pager&) = delete;
  Pager& operator=(const Pager&) = delete;

  // A new tensor, resident on host (its home block comes from the host pool;
  // contents undefined until first written), or with NVMe, a slot of the
  // file (kNvme). InvalidArgument for zero bytes, more than the whole device
  // budget, or more than half the host staging budget (a page-in and the
  // page-out that makes room for it may need staging at once);
  // ResourceExhausted when the host pool is full.
  absl::StatusOr<TensorHandle> Register(size_t bytes, Tag tag, std::string name);
  // Frees the tensor's memory. FailedPrecondition while it is held.
  absl::Status Unregister(TensorHandle handle);

  // Holds the tensor on the device (paging it in, evicting others if needed)
  // and returns its device pointer in a Pin. Work enqueued on `stream` after
  // this call runs after the copy in and after the work of Pins of this
  // tensor released earlier; a null stream means the calling thread uses the
  // pointer itself (host devices only), and Acquire blocks until then.
  // ResourceExhausted (nothing changed) when held tensors leave no room;
  // with NVMe, a file error (DataLoss when it changed underneath) leaves the
  // tensor where it was.
  absl::StatusOr<Pin> Acquire(TensorHandle handle, Stream* stream,
                              Access access = Access::kReadWrite);

  // Starts moving one tensor; both return at once (no-op if already there),
  // except that a page-out to kNvme writes the file before returning.
  // PageOut of a held tensor is FailedPrecondition; to kNvme without an NVMe
  // tier, or to kDevice, InvalidArgument.
  absl::Status PageIn(TensorHandle handle);
  absl::Status PageOut(TensorHandle handle, Residency to = Residency::kHost);
  // Starts paging in the next `n` distinct tensors of the recorded order
  // (from the current position of this step) that are not resident, evicting
  // only tensors needed later than they are: a copy up from host memory, or
  // for a tensor only in the NVMe file, its read into host staging (a read
  // that fails is dropped; the Acquire reads again and says why). Returns
  // how many it started.
  absl::StatusOr<int> Prefetch(int n);

  // Records the sequence of Acquire calls until EndStep; it becomes the
  // forecast that drives eviction and Prefetch in the following steps.
  // FailedPrecondition for BeginStep inside a step or EndStep outside one.
  absl::Status BeginStep();
  absl::Status EndStep();

  // Evicts down to the new budget. FailedPrecondition (nothing changed) when
  // held tensors alone exceed it; InvalidArgument for zero.
  absl::Status SetBudget(size_t budget_bytes);

  absl::StatusOr<Residency> residency(TensorHandle handle) const;
  PagerStats stats() const;
  int device() const { return device_; }
  Stream* page_in_stream() const { return in_; }
  Stream* page_out_stream() const { return out_; }
  // Blocks until every copy started so far has finished.
  absl::Status Synchronize();

 private:
  struct Tensor {
    std::string name;
    size_t bytes = 0;
    Tag tag = Tag::kOther;
    // Home block in the host pool, for life; with NVMe a staging block,
    // held only while it is the nearest copy or newer than the file.
    void* host = nullptr;
    void* device = nullptr;   // set while resident on the device
    bool host_valid = false;  // the host block holds data (paged out at least once)
    bool dirty = false;       // the device copy is newer than the host block
    uint64_t slot = 0;        // NVMe: its slot in the file, for life
    bool host_dirty = false;  // NVMe: the host block is newer than the file
    int holds = 0;            // live Pins
    // NVMe: Prefetch's read of the file into `host`, in flight on the I/O
    // thread until FinishRead takes its outcome, read_status (the block is
    // off limits till then). The status is moved across, never copied: a
    // copy shares a count that sanitizers cannot see (absl is not built
    // with them).
    std::shared_future<absl::Status> reading;
    std::shared_ptr<absl::Status> read_status;
    uint64_t last_use = 0;    // LRU clock
    std::shared_ptr<Event> ready;  // after the copy that made the current copy
    std::vector<std::shared_ptr<Event>> uses;  // acquirers' work on the device copy
  };

  Pager(DeviceSystem* system, int device, PinnedHostPool* host_pool, Stream* in, Stream* out,
        size_t budget, std::unique_ptr<NvmeStore> nvme, std::unique_ptr<SerialQueue> io,
        size_t host_budget);

  absl::StatusOr<Tensor*> Find(TensorHandle handle) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FailedPrecondition naming `verb` ("page out") while `t` is held.
  absl::Status CheckNotHeld(const Tensor& t, absl::string_view verb) const;
  size_t NextUse(uint64_t id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Tensor* PickVictim(size_t min_next_use) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Of the tensors `next_use` gives a position for (nullopt: not a
  // candidate), the one used furthest ahead, at least `min_next_use`.
  using NextUseFn =
      absl::FunctionRef<std::optional<size_t>(uint64_t id, const Tensor& t)>;
  Tensor* PickFurthest(size_t min_next_use, NextUseFn next_use) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  size_t EvictableBytes(size_t min_next_use) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status MakeRoom(const Tensor& t, size_t min_next_use) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Evict(size_t min_next_use) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<void*> AllocateDevice(const Tensor& t, size_t min_next_use)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status PageInLocked(Tensor& t, size_t min_next_use) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status MoveIn(Tensor& t, size_t min_next_use) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `min_next_use`: what a staging block it needs may write back (as Evict's).
  absl::Status PageOutLocked(Tensor& t, size_t min_next_use) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status OrderOutAfterUses(Tensor& t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Release(TensorHandle handle, Stream* stream);
  static Residency Where(const Tensor& t);
  size_t& BytesIn(Residency residency) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves `t`'s bytes in the stats from the residency it had to where it is.
  void Recount(const Tensor& t, Residency from) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The NVMe tier's staging (pager_staging.cc). Host blocks are padded to
  // the file's alignment and count against the host budget.
  size_t StagingBytes(const Tensor& t) const;
  // A staging block for `t`, writing back others first if the budget needs.
  absl::Status AllocateStaging(Tensor& t, size_t min_next_use) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Frees it on `stream` (null: the host is done with it).
  absl::Status FreeStaging(Tensor& t, Stream* stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // File -> staging block, when the file holds `t`'s nearest copy.
  absl::Status StageIn(Tensor& t, size_t min_next_use) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Prefetch's StageIn: the read queued on the I/O thread, `t` staged at once.
  absl::Status StartRead(Tensor& t, size_t min_next_use) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits for `t`'s read in flight, if any: its block then holds the file's
  // bytes, or (the read failed: its error) is freed again.
  absl::Status FinishRead(Tensor& t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The same wait, outside the lock (other threads go on meanwhile).
  void AwaitRead(TensorHandle handle) ABSL_LOCKS_EXCLUDED(mu_);
  // Writes the staging block to the file if newer, then frees it.
  absl::Status WriteBack(Tensor& t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Tensor* PickStagingVictim(size_t min_next_use) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  DeviceSystem* const system_;
  const int device_;
  DevicePool& device_pool_;
  PinnedHostPool* const host_pool_;
  Stream* const in_;   // page-in copies
  Stream* const out_;  // page-out copies
  const bool has_bytes_;
  const std::unique_ptr<NvmeStore> nvme_;  // null: no NVMe tier
  // NVMe tier: Prefetch's reads. After nvme_, so it stops first.
  const std::unique_ptr<SerialQueue> io_;
  const size_t host_budget_;               // NVMe tier: staging bytes

  mutable Mutex mu_;
  std::map<uint64_t, Tensor> tensors_ ABSL_GUARDED_BY(mu_);  // ordered: deterministic ties
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t clock_ ABSL_GUARDED_BY(mu_) = 0;  // LRU time, ticks on acquire and release
  size_t budget_ ABSL_GUARDED_BY(mu_);
  PagerStats stats_ ABSL_GUARDED_BY(mu_);
  AccessOrder forecast_ ABSL_GUARDED_BY(mu_);  // the previous step's record
  std::vector<uint64_t> recording_ ABSL_GUARDED_BY(mu_);
  bool in_step_ ABSL_GUARDED_BY(mu_) = false;
  size_t position_ ABSL_GUARDED_BY(mu_) = 0;  // acquires since BeginStep
  const Tensor* moving_ ABSL_GUARDED_BY(mu_) = nullptr;  // being paged in: keeps its staging
};

// Holds a tensor on the device: while a Pin lives the tensor is neither
// evicted nor paged out, and data() stays valid. Release (or destruction)
// records an event on the acquiring stream, so the tensor's device memory is
// copied out or reused only after the work enqueued there. Movable; must not
// outlive its Pager.
class Pager::Pin {
 public:
  Pin() = default;
  Pin(Pin&& other) noexcept { *this = std::move(other); }
  Pin& operator=(Pin&& other) noexcept;
  ~Pin() { (void)Release(); }

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  TensorHandle handle() const { return handle_; }
  bool held() const { return pager_ != nullptr; }
  // Ends the hold early; a second call does nothing.
  absl::Status Release();

 private:
  friend class Pager;
  Pin(Pager* pager, TensorHandle handle, void* data, size_t bytes, Stream* stream)
      : pager_(pager), handle_(handle), data_(data), bytes_(bytes), stream_(stream) {}

  Pager* pager_ = nullptr;
  TensorHandle handle_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Stream* stream_ = nullptr;
};

}  // namespace zero
