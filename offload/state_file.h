// Optimizer state on NVMe (ZeRO-Infinity's offload_optimizer: nvme): a few
// parallel fp32 arrays ("planes": master weights, each optimizer state) over
// a few ranges (one per unit), kept in one file and streamed through
// kStagingBuffers bounded staging buffers. Run() is the pipeline: while chunk
// i is handed to the caller (the CPU step), chunks i+1 and i+2 are read and
// i-1 and i-2 written, so a pass costs about one read and one write of the
// state. The reads and writes run one at a time on the file's I/O queue
// (base/serial_queue.h) in the order the pass issues them (read i+2, then
// write i): the disk never idles while the step works, and the read the
// step waits for next is never behind more than one write. One request at
// a time is the disk's best: the virtio disk here moved the same reads and
// writes 10-35% slower with two or four requests in flight at once (their
// mix costs it seeks).
//
// Chunk j of a range holds elements [j*C, (j+1)*C) of every plane in one
// slot of the file (C = chunk_elements). A pass that writes puts each chunk
// in a new slot and switches to them only when the whole pass succeeded: a
// write that fails (disk full) or a read that finds the file changed
// underneath leaves the range as it was before the pass.
//
// A read-only pass takes a chunk that an earlier pass left in a staging
// buffer, unchanged since, from there: reading a chunk again and again, a
// plane or a few elements at a time (a checkpoint), costs one read of it.
// Passes that write read what they keep from the file, always.
//
// One caller at a time (the engine's step thread, or its worker); the file
// keeps one I/O thread of its own. On meta devices: books only, no thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "memory/resource.h"
#include "base/serial_queue.h"
#include "offload/internal/nvme_store.h"

namespace zero {

struct StateFileOptions {
  std::string folder;                      // where the file goes (created, removed at the end)
  size_t chunk_elements = size_t{1} << 22;  // per plane per chunk (at most the longest range)
  bool direct_io = true;
  bool has_bytes = true;  // false (meta devices): no file, no I/O, no calls back
  std::function<absl::Status(uint64_t offset, size_t bytes)> write_fault;  // test-only
};

struct StateFileStats {
  uint64_t file_bytes = 0;     // the file's extent now
  uint64_t state_bytes = 0;    // planes x elements x 4: what the file holds
  uint64_t staging_bytes = 0;  // the kStagingBuffers buffers
  uint64_t bytes_read = 0, bytes_written = 0;
};

class StateFile {
 public:
  static constexpr int kStagingBuffers = 5;
  enum class Pass {
    kRead,    // the caller reads the chunks (and leaves them as they are); nothing is written
    kWrite,   // the caller overwrites [begin, begin + count) of every plane
    kUpdate,  // read, changed in place, written back
  };
  // (offset of the chunk's first element in the range, elements, one
  // pointer per plane at that element). An error stops the pass.
  using ChunkFn =
      absl::FunctionRef<absl::Status(size_t offset, size_t count, std::span<float* const> planes)>;

  // Zero-filled planes over ranges of these element counts; staging comes
  // from `staging` (pinned host memory; may be null without bytes),
  // kStagingBuffers buffers of planes x chunk.
  static absl::StatusOr<std::unique_ptr<StateFile>> Create(int planes, std::vector<size_t> ranges,
                                                           MemoryResource* staging,
                                                           StateFileOptions options);
  ~StateFile();
  StateFile(const StateFile&) = delete;
  StateFile& operator=(const StateFile&) = delete;

  // Streams [begin, begin + count) of `range` through `fn`, chunk by chunk.
  absl::Status Run(int range, size_t begin, size_t count, Pass pass, ChunkFn fn);
  absl::Status Run(int range, Pass pass, ChunkFn fn) {
    const bool known = range >= 0 && range < range_count();
    return Run(range, 0, known ? range_elements(range) : 0, pass, fn);
  }

  int planes() const { return planes_; }
  int range_count() const { return static_cast<int>(chunks_.size()); }
  size_t range_elements(int range) const { return elements_[range]; }
  const std::string& path() const { return store_->path(); }
  StateFileStats stats() const;

 private:
  struct Chunk {
    size_t first = 0, count = 0;  // elements of the range
    uint64_t slot = 0;
    uint64_t version = 0;  // +1 whenever a pass's write of it is adopted
  };
  // What a staging buffer holds: chunk `chunk` of `range` as of `version`.
  struct Held {
    int range = -1;
    size_t chunk = 0;
    uint64_t version = 0;
  };

  StateFile(int planes, size_t chunk_elements, std::unique_ptr<NvmeStore> store,
            std::unique_ptr<SerialQueue> io, MemoryResource* staging, bool has_bytes);
  // A pass's request on the I/O thread for one staging buffer.
  struct InFlight {
    std::future<absl::Status> done;
    uint64_t read_slot = 0;
    std::optional<uint32_t> read_crc;  // a read's: set by the I/O thread before `done`
  };
  // `request` on the I/O thread (at once on the caller's without bytes).
  template <typename Request>
  std::future<absl::Status> Issue(Request request);
  // Waits for `request`; a read's bytes in `buffer` are checked here, on the
  // caller's thread, so that the disk goes on meanwhile.
  absl::Status Settle(InFlight& request, const void* buffer) const;
  // fn over [lo, hi) of chunk `c` held in `buffer`; a writing pass's result
  // is the CRC-32C of the slot's new bytes.
  absl::StatusOr<std::optional<uint32_t>> Hand(const Chunk& c, size_t lo, size_t hi, void* buffer,
                                               bool writes, ChunkFn fn) const;
  absl::Status AddRange(size_t elements);
  absl::Status CheckRange(int range, size_t begin, size_t count) const;
  void Adopt(std::vector<Chunk>& chunks, size_t first,
             const std::vector<std::optional<uint64_t>>& fresh, bool adopt);
  bool Holds(size_t buffer, int range, size_t chunk) const;
  // The buffer for chunk `first` of a read-only pass over chunks [first,
  // last]: where the most of its first chunks already are.
  size_t FirstBuffer(int range, size_t first, size_t last) const;
  void Remember(int range, size_t first, size_t last, size_t base, bool ok);
  // fn over [lo, hi) of chunk `c` held in `buffer`, in blocks small enough
  // to stay in cache, each block's CRC taken right after fn wrote it: the
  // CRC-32C of the slot's bytes without another pass over memory.
  absl::StatusOr<uint32_t> UpdateAndChecksum(const Chunk& c, size_t lo, size_t hi, void* buffer,
                                             ChunkFn fn) const;
  absl::Status ZeroFill();

  const int planes_;
  const size_t chunk_elements_;
  const std::unique_ptr<NvmeStore> store_;
  std::unique_ptr<SerialQueue> io_;  // null without bytes
  MemoryResource* const staging_;
  const bool has_bytes_;
  std::vector<void*> buffers_;  // kStagingBuffers, planes x chunk_elements floats each
  std::vector<Held> held_;      // per buffer; with bytes only
  std::vector<size_t> elements_;
  std::vector<std::vector<Chunk>> chunks_;  // per range
};

}  // namespace zero
