// A rank's data file written in the background from a snapshot of its owned
// state. The training thread copies the file's bytes (header, then the
// chunks of chunk_plan.h) segment by segment into a bounded, reused set of
// pinned host buffers (pinned_buffers.h), blocking only while every buffer is in the writer's
// hands; a background thread checksums each segment (every byte once: chunk
// and file CRCs are combined from the pieces) and appends it through
// AtomicFileWriter (O_DIRECT), then fsyncs and renames. No collective runs
// on the background thread: the ranks agree on the training thread.
//
// Start and Finish from one thread (the rank's training thread).
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
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

class SnapshotWriter {
 public:
  // Segments of `segment_bytes` (rounded up to 4 KiB); as many buffers as
  // fit in `snapshot_bytes`, at least two.
  SnapshotWriter(size_t segment_bytes, size_t snapshot_bytes);
  ~SnapshotWriter();  // waits for the background write (its outcome is dropped)

  // Snapshots `plan` of rank's owned state, `header` first, into `path` and
  // returns once every byte is copied: the engine may change from then on.
  // Call Finish before the next Start. Errors surface at Finish. `overlap`:
  // the writer starts at once (a caller that waits for the file anyway),
  // the snapshot takes at most 8 buffers and the calling thread checksums
  // each segment after copying it, so the writer only writes; otherwise the
  // writer checksums, and starts only after a snapshot that fits in the
  // buffers.
  void Start(const Participant& rank, std::string path, std::string header, DataFilePlan plan,
             bool overlap);
  // Allocates and faults in now the buffers a Start (overlap off) of a
  // `file_bytes` file takes, so that the first such Start blocks no longer
  // than the next ones. Not while a save runs.
  absl::Status Reserve(DeviceSystem& devices, uint64_t file_bytes);
  // Waits for the file to be durable in place; its size and checksums.
  absl::StatusOr<WrittenFile> Finish();
  bool running() const { return thread_.joinable(); }

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
  absl::Status Fill(const Participant& rank, size_t segment, std::byte* buffer);
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
  std::thread thread_;
  absl::StatusOr<WrittenFile> result_;

  Mutex mu_;
  std::condition_variable cv_;
  std::vector<std::byte*> free_ ABSL_GUARDED_BY(mu_);
  std::deque<Filled> queue_ ABSL_GUARDED_BY(mu_);
  bool writer_failed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace zero::checkpoint
