// A rank's data file written in the background from a snapshot of its owned
// state. The file's bytes (header, then the chunks of chunk_plan.h) are
// copied segment by segment into a bounded, reused set of pinned host
// buffers (pinned_buffers.h); a background thread checksums each segment
// (every byte once: chunk and file CRCs are combined from the pieces) and
// appends it through AtomicFileWriter (O_DIRECT), then fsyncs and renames.
// Who copies (SnapshotMode): the calling thread on the engine's stream, or
// a snapshot thread on a stream of its own while training goes on, the
// engine's changes to owned state waiting for it (OwnedStateAccess::Guard).
// No collective runs on either thread: the ranks agree on the training thread.
//
// Start and Finish from one thread (the rank's training thread).
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "base/direct_file.h"
#include "base/mutex.h"
#include "zero/checkpoint/checkpoint.h"
#include "zero/checkpoint/internal/chunk_plan.h"
#include "zero/checkpoint/internal/file_io.h"
#include "zero/checkpoint/internal/pinned_buffers.h"

namespace zero::checkpoint {

struct WrittenFile {
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
  std::vector<uint32_t> chunk_crcs;  // in plan order
};

// The largest segment (SaveOptions::write_bytes) a writer takes.
inline constexpr size_t kMaxWriteBytes = size_t{1} << 30;

// Who copies the snapshot, and when the writer starts.
enum class SnapshotMode {
  // Save: the calling thread copies (engine.stream()) and checksums each
  // segment, the writer writes meanwhile; at most 8 buffers.
  kOverlap,
  // The calling thread copies on engine.stream(); the writer starts after a
  // snapshot that fits in the buffers (the state on NVMe, which only the
  // training thread may stream).
  kBlocking,
  // Start returns at once: a snapshot thread copies on a stream of its own
  // (after the work enqueued so far on the engine's streams) while training
  // goes on; then, as in kBlocking, the writer checksums and writes. The
  // state must have addresses (Engine::owned_state), not be on NVMe.
  kBackground,
};

class SnapshotWriter {
 public:
  // Segments of `segment_bytes` (rounded up to 4 KiB); as many buffers as
  // fit in `snapshot_bytes`, at least two.
  SnapshotWriter(size_t segment_bytes, size_t snapshot_bytes);
  ~SnapshotWriter();  // waits for the snapshot and the write (the outcome is dropped)

  // Snapshots `plan` of rank's owned state, `header` first, into `path`.
  // Returns what becomes ready once every byte is copied (at once for
  // kOverlap and kBlocking, where the copy is done on return): the engine
  // must not change owned state before that. Call Finish before the next
  // Start. Errors surface at Finish.
  std::shared_future<void> Start(const Participant& rank, std::string path, std::string header,
                                 DataFilePlan plan, SnapshotMode mode);
  // Allocates and faults in now the buffers a Start (not kOverlap) of a
  // `file_bytes` file takes, so that the first such Start blocks no longer
  // than the next ones. Not while a save runs.
  absl::Status Reserve(DeviceSystem& devices, uint64_t file_bytes);
  // Waits for the file to be durable in place; its size and checksums.
  absl::StatusOr<WrittenFile> Finish();
  bool running() const { return thread_.joinable() || snapshot_thread_.joinable(); }

  size_t buffer_bytes() const;  // host memory held for snapshots

 private:
  // A segment's CRC and those of its pieces of chunks, in file order.
  struct Sums {
    uint32_t crc = 0;
    struct Piece {
      size_t chunk;
      uint32_t crc;
      uint64_t bytes;
    };
    std::vector<Piece> pieces;
  };
  struct Filled {
    size_t segment;
    std::byte* buffer;
    absl::Status status;        // of the copy that filled it
    std::optional<Sums> sums;   // taken by the filling thread (overlap), else by the writer
  };
  // A segment's file bytes: [SegmentBegin, SegmentEnd).
  uint64_t SegmentBegin(size_t segment) const { return segment * segment_bytes_; }
  uint64_t SegmentEnd(size_t segment) const {
    return std::min<uint64_t>(SegmentBegin(segment) + segment_bytes_, plan_.bytes);
  }
  // At least `count` buffers (a bigger set replaces the old); `fault_in`
  // touches every page of a new set.
  absl::Status EnsureBuffers(DeviceSystem& devices, size_t count, bool fault_in);
  size_t BuffersFor(uint64_t file_bytes, bool overlap) const;
  // Copies every segment into a buffer (checksummed when `checksum`) and
  // queues it for the writer; stops at the first error.
  void FillAll(const Participant& rank, bool checksum);
  absl::Status Fill(const Participant& rank, size_t segment, std::byte* buffer);
  // kBackground: sources_ and the copy stream, ordered after the engine's work.
  absl::Status PrepareBackground(const Participant& rank);
  absl::StatusOr<Sums> Checksum(size_t segment, const std::byte* buffer) const;
  void WriteAll(std::string path);  // the background thread
  absl::Status WriteSegment(AtomicFileWriter& writer, Filled& filled, WrittenFile& out);
  std::byte* Acquire();  // null once the writer has failed
  void Push(Filled filled);

  const size_t segment_bytes_;
  const size_t max_buffers_;
  std::unique_ptr<PinnedBuffers> buffers_;  // grown on demand, kept across saves

  // The save in flight.
  std::string header_;
  DataFilePlan plan_;
  size_t segments_ = 0;
  // kBackground: each unit's owned buffers (masters, then state), taken on
  // the training thread; empty: copied through the engine (EnqueueCopyToHost).
  std::vector<std::vector<const float*>> sources_;
  Stream* copy_stream_ = nullptr;  // the snapshot thread's; the DeviceSystem owns it
  std::promise<void> taken_;       // set once every byte is copied (Start's future)
  std::thread snapshot_thread_;    // kBackground: copies, then writes if the writer has not started
  std::thread thread_;             // the writer, when started apart
  absl::StatusOr<WrittenFile> result_;

  Mutex mu_;
  std::condition_variable cv_;
  std::vector<std::byte*> free_ ABSL_GUARDED_BY(mu_);
  std::deque<Filled> queue_ ABSL_GUARDED_BY(mu_);
  bool writer_failed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace zero::checkpoint
