#include "zero/checkpoint/internal/snapshot_writer.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <system_error>

#include "absl/strings/str_format.h"
#include "base/crc32c.h"
#include "base/status_macros.h"
#include "zero/checkpoint/internal/owned_state_io.h"

namespace zero::checkpoint {
namespace {

constexpr int kWriterNice = 10;
// Buffers a snapshot that overlaps its write (Save) takes at most: enough to
// keep the writer busy; more would be fresh pages the kernel zeroes (pins,
// on cards) for nothing (measured with the whole state in buffers: sys CPU
// 0.17 s per Save of 4 ranks against 0.04 s, wall time the same).
constexpr size_t kOverlapBuffers = 8;

uint64_t ChunkEnd(const PlannedChunk& c) { return c.offset + (c.end - c.begin) * sizeof(float); }

// fn(chunk index, file bytes [a, b)) for each piece of a chunk inside file
// bytes [begin, end), in file order; stops at the first error.
template <typename Fn>
absl::Status ForEachPiece(const DataFilePlan& plan, uint64_t begin, uint64_t end, Fn fn) {
  auto it = std::partition_point(plan.chunks.begin(), plan.chunks.end(),
                                 [&](const PlannedChunk& c) { return ChunkEnd(c) <= begin; });
  for (; it != plan.chunks.end() && it->offset < end; ++it) {
    RETURN_IF_ERROR(
        fn(it - plan.chunks.begin(), std::max(begin, it->offset), std::min(end, ChunkEnd(*it))));
  }
  return absl::OkStatus();
}

}  // namespace

SnapshotWriter::SnapshotWriter(size_t segment_bytes, size_t snapshot_bytes)
    // Clamped (Start refuses what is outside): rounding SIZE_MAX up wrapped
    // to a segment of 0 bytes, then a division by it.
    : segment_bytes_(RoundUpToAlignment(std::clamp<size_t>(segment_bytes, 1, kMaxWriteBytes))),
      max_buffers_(std::max<size_t>(2, snapshot_bytes / segment_bytes_)),
      result_(absl::FailedPreconditionError("no save was started")) {}

SnapshotWriter::~SnapshotWriter() {
  if (snapshot_thread_.joinable()) snapshot_thread_.join();
  if (thread_.joinable()) thread_.join();
}

size_t SnapshotWriter::buffer_bytes() const {
  return buffers_ == nullptr ? 0 : buffers_->count() * buffers_->bytes();
}

size_t SnapshotWriter::BuffersFor(uint64_t file_bytes, bool overlap) const {
  const size_t segments = (file_bytes + segment_bytes_ - 1) / segment_bytes_;
  const size_t most = overlap ? std::min(max_buffers_, kOverlapBuffers) : max_buffers_;
  return std::max<size_t>(1, std::min(most, segments));
}

absl::Status SnapshotWriter::EnsureBuffers(DeviceSystem& devices, size_t count, bool fault_in) {
  if (buffers_ != nullptr && buffers_->count() >= count) return absl::OkStatus();
  buffers_.reset();  // its pinned memory goes back before more is pinned
  ASSIGN_OR_RETURN(buffers_, PinnedBuffers::Create(devices, count, segment_bytes_));
  if (fault_in) {
    for (size_t b = 0; b < buffers_->count(); ++b) std::memset((*buffers_)[b], 0, buffers_->bytes());
  }
  return absl::OkStatus();
}

absl::Status SnapshotWriter::Reserve(DeviceSystem& devices, uint64_t file_bytes) {
  if (running()) return absl::FailedPreconditionError("a save is running");
  return EnsureBuffers(devices, BuffersFor(file_bytes, /*overlap=*/false), /*fault_in=*/true);
}

std::shared_future<void> SnapshotWriter::Start(const Participant& rank, std::string path,
                                               std::string header, DataFilePlan plan,
                                               SnapshotMode mode) {
  header_ = std::move(header);
  plan_ = std::move(plan);
  segments_ = (plan_.bytes + segment_bytes_ - 1) / segment_bytes_;
  const bool overlap = mode == SnapshotMode::kOverlap;
  taken_ = std::promise<void>();
  std::shared_future<void> snapshot = taken_.get_future().share();
  absl::Status ready = EnsureBuffers(rank.devices, BuffersFor(plan_.bytes, overlap), false);
  sources_.clear();
  if (ready.ok() && mode == SnapshotMode::kBackground) ready = PrepareBackground(rank);
  if (!ready.ok()) {
    result_ = ready;
    taken_.set_value();
    return snapshot;
  }
  {
    MutexLock lock(mu_);
    free_.clear();
    for (size_t b = 0; b < buffers_->count(); ++b) free_.push_back((*buffers_)[b]);
    queue_.clear();
    writer_failed_ = false;
  }
  // A snapshot that fits in the buffers is taken before the writer starts:
  // the checksums and transfers would otherwise share the cores and the
  // memory bandwidth with the copy (measured on 2 cores: Start blocked
  // 0.04-0.09 of a Save instead of 0.11-0.26).
  const bool write_after = !overlap && buffers_->count() >= segments_;
  if (!write_after) thread_ = std::thread(&SnapshotWriter::WriteAll, this, path);
  if (mode == SnapshotMode::kBackground) {
    // `rank` is the caller's and may go: the thread keeps a copy of it.
    try {
      snapshot_thread_ = std::thread([this, rank, write_after, path] {
        FillAll(rank, /*checksum=*/false);
        taken_.set_value();
        if (write_after) WriteAll(path);
      });
      return snapshot;
    } catch (const std::system_error&) {  // no thread (a limit): copy here instead
    }
  }
  FillAll(rank, /*checksum=*/overlap);
  taken_.set_value();
  if (write_after) thread_ = std::thread(&SnapshotWriter::WriteAll, this, std::move(path));
  return snapshot;
}

void SnapshotWriter::FillAll(const Participant& rank, bool checksum) {
  for (size_t s = 0; s < segments_; ++s) {
    std::byte* buffer = Acquire();
    if (buffer == nullptr) return;  // the writer failed: Finish says why
    absl::Status filled = Fill(rank, s, buffer);
    std::optional<Sums> sums;
    if (filled.ok() && checksum) {
      absl::StatusOr<Sums> taken = Checksum(s, buffer);
      if (taken.ok()) sums = *std::move(taken);
      filled = taken.status();
    }
    Push({s, buffer, filled, std::move(sums)});
    if (!filled.ok()) return;
  }
}

absl::Status SnapshotWriter::PrepareBackground(const Participant& rank) {
  Engine& engine = rank.engine;
  if (!engine.owned_state().nvme_file().empty()) {
    return absl::InternalError("a background snapshot of state on NVMe (no addresses)");
  }
  if (copy_stream_ == nullptr || copy_stream_->device() != engine.stream()->device()) {
    ASSIGN_OR_RETURN(copy_stream_, rank.devices.CreateStream(engine.stream()->device()));
  }
  for (int u = 0; u < static_cast<int>(engine.layout().units().size()); ++u) {
    const OwnedStateAccess::Pieces owned = engine.owned_state().pieces(u);
    std::vector<const float*>& unit = sources_.emplace_back(1, owned.master);
    unit.insert(unit.end(), owned.state.begin(), owned.state.end());
  }
  // After the last Step's updates (stream()) and its all-gather, which
  // writes the whole parameters that hold the masters when they are not
  // kept apart (comm_stream()).
  for (Stream* stream : {engine.stream(), engine.comm_stream()}) {
    ASSIGN_OR_RETURN(std::shared_ptr<Event> done, stream->Record());
    RETURN_IF_ERROR(copy_stream_->Wait(done));
  }
  return absl::OkStatus();
}

absl::StatusOr<WrittenFile> SnapshotWriter::Finish() {
  if (snapshot_thread_.joinable()) snapshot_thread_.join();
  if (thread_.joinable()) thread_.join();
  return std::exchange(result_, absl::FailedPreconditionError("no save was started"));
}

std::byte* SnapshotWriter::Acquire() {
  MutexLock lock(mu_);
  lock.Await(cv_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return writer_failed_ || !free_.empty();
  });
  if (writer_failed_) return nullptr;
  std::byte* buffer = free_.back();
  free_.pop_back();
  return buffer;
}

void SnapshotWriter::Push(Filled filled) {
  MutexLock lock(mu_);
  queue_.push_back(std::move(filled));
  cv_.notify_all();
}

absl::Status SnapshotWriter::Fill(const Participant& rank, size_t segment, std::byte* buffer) {
  Engine& engine = rank.engine;
  const uint64_t begin = SegmentBegin(segment), end = SegmentEnd(segment);
  if (begin < header_.size()) {
    std::memcpy(buffer, header_.data() + begin, std::min<uint64_t>(end, header_.size()) - begin);
  }
  const std::vector<Unit>& units = engine.layout().units();  // immutable: any thread
  auto copy = [&](size_t i, uint64_t a, uint64_t b) {
    const PlannedChunk& c = plan_.chunks[i];
    const size_t at = c.shard_index - units[c.unit].shard_offset + (a - c.offset) / sizeof(float);
    float* to = reinterpret_cast<float*>(buffer + (a - begin));
    if (!sources_.empty()) return copy_stream_->Copy(to, sources_[c.unit][c.buffer] + at, b - a);
    return EnqueueCopyToHost(engine, c.unit, c.buffer, at, to, (b - a) / sizeof(float));
  };
  const absl::Status enqueued = ForEachPiece(plan_, begin, end, copy);
  // Also after a failed enqueue: the copies before it still read the state
  // (which the engine may change once the snapshot is over) and write the buffer.
  const absl::Status synced = (sources_.empty() ? engine.stream() : copy_stream_)->Synchronize();
  return enqueued.ok() ? synced : enqueued;
}

// While the segment is still in cache, on whichever thread filled it or on
// the writer.
absl::StatusOr<SnapshotWriter::Sums> SnapshotWriter::Checksum(size_t segment,
                                                              const std::byte* buffer) const {
  const uint64_t begin = SegmentBegin(segment), end = SegmentEnd(segment);
  Sums sums;
  if (begin < header_.size()) {
    sums.crc = Crc32c(buffer, std::min<uint64_t>(end, header_.size()) - begin);
  }
  RETURN_IF_ERROR(ForEachPiece(plan_, begin, end, [&](size_t i, uint64_t a, uint64_t b) {
    const uint32_t piece = Crc32c(buffer + (a - begin), b - a);
    sums.pieces.push_back({i, piece, b - a});
    sums.crc = Crc32cCombine(sums.crc, piece, b - a);
    return absl::OkStatus();
  }));
  return sums;
}

absl::Status SnapshotWriter::WriteSegment(AtomicFileWriter& writer, Filled& filled,
                                          WrittenFile& out) {
  if (!filled.sums) {
    ASSIGN_OR_RETURN(filled.sums, Checksum(filled.segment, filled.buffer));
  }
  for (const Sums::Piece& p : filled.sums->pieces) {
    out.chunk_crcs[p.chunk] = Crc32cCombine(out.chunk_crcs[p.chunk], p.crc, p.bytes);
  }
  const uint64_t begin = SegmentBegin(filled.segment), end = SegmentEnd(filled.segment);
  return writer.Append(filled.buffer, end - begin, filled.sums->crc);
}

void SnapshotWriter::WriteAll(std::string path) {
  // Below training's priority: where cores are short, the snapshot copies
  // (which training waits for) and the steps run first; the write only has
  // to finish before the next save. Linux sets nice per thread; advice only.
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kWriterNice);
  absl::StatusOr<AtomicFileWriter> writer = AtomicFileWriter::Open(path);
  absl::Status status = writer.status();
  WrittenFile out;
  out.chunk_crcs.assign(plan_.chunks.size(), 0);
  for (size_t done = 0; status.ok() && done < segments_; ++done) {
    Filled filled;
    {
      MutexLock lock(mu_);
      lock.Await(cv_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty(); });
      filled = std::move(queue_.front());
      queue_.pop_front();
    }
    status = filled.status.ok() ? WriteSegment(*writer, filled, out) : filled.status;
    MutexLock lock(mu_);
    free_.push_back(filled.buffer);
    cv_.notify_all();
  }
  if (status.ok() && writer->bytes() != plan_.bytes) {
    status = absl::InternalError(
        absl::StrFormat("wrote %d bytes, planned %d", writer->bytes(), plan_.bytes));
  }
  if (status.ok()) {
    out.bytes = writer->bytes();
    out.crc32c = writer->crc32c();
    status = writer->Commit();
  }
  if (status.ok()) {
    result_ = std::move(out);
    return;
  }
  result_ = status;
  MutexLock lock(mu_);
  writer_failed_ = true;
  cv_.notify_all();
}

}  // namespace zero::checkpoint
