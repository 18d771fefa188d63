#include "zero/checkpoint/internal/chunk_stream.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "zero/checkpoint/internal/verified_reader.h"

namespace zero::checkpoint {
namespace {

// The outcome of the read in one staging buffer.
struct Slot {
  bool ready = false;
  bool read = false;  // from the file this Run (else still in the slot from the last)
  absl::Status status;
};

}  // namespace

absl::StatusOr<ChunkStream> ChunkStream::Open(const std::string& folder, const Manifest& manifest,
                                              const LoadPlan& plan, DeviceSystem& devices) {
  ChunkStream stream(folder, manifest, plan, devices);
  // Each file checked before anything is read; the reads open them again
  // (a few at a time) and check them again.
  int last = -1;
  for (const ChunkRead& read : plan.reads) {  // by file
    if (read.file == last) continue;
    last = read.file;
    RETURN_IF_ERROR(stream.files_->Get(read.file).status());
  }
  return stream;
}

absl::Status ChunkStream::ReadAndVerify(const ChunkRead& read, std::byte* buffer, bool& direct) {
  ASSIGN_OR_RETURN(std::shared_ptr<DirectFile> file, files_->Get(read.file));
  RETURN_IF_ERROR(file->ReadAt(read.begin, buffer, read.end - read.begin));
  direct = file->direct();
  for (const Placement& p : read.placements) {
    RETURN_IF_ERROR(
        CheckChunk(file->path(), *p.param, *p.chunk, buffer + (p.chunk->offset - read.begin)));
  }
  return absl::OkStatus();
}

// The reads the last Run left in the slots come first, each at its slot's
// first turn, then the others in plan order: a second pass re-reads only
// what did not fit in the staging (the placer takes reads in any order).
std::vector<size_t> ChunkStream::Order() const {
  const size_t n = plan_->reads.size();
  std::vector<bool> taken(n, false);
  for (size_t i : resident_) {
    if (i != kNone) taken[i] = true;
  }
  std::vector<size_t> order;
  order.reserve(n);
  size_t next = 0;
  auto next_unread = [&] {
    while (taken[next]) ++next;
    taken[next] = true;
    return next;
  };
  for (size_t i : resident_) order.push_back(i != kNone ? i : next_unread());
  while (order.size() < n) order.push_back(next_unread());
  return order;
}

absl::Status ChunkStream::Run(Consumer consume) {
  const std::vector<ChunkRead>& reads = plan_->reads;
  const int slots = plan_->slots;
  if (reads.empty()) return absl::OkStatus();
  // Allocated once and kept for the next Run: Load's second pass then
  // reads into pages the first already faulted in.
  if (buffers_ == nullptr) {
    ASSIGN_OR_RETURN(buffers_, PinnedBuffers::Create(*devices_, slots, plan_->slot_bytes));
    resident_.assign(slots, kNone);
  }
  peak_staging_bytes_ = std::max<uint64_t>(peak_staging_bytes_, plan_->staging_bytes());
  const std::vector<size_t> order = Order();
  std::vector<Slot> slot(slots);

  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  size_t next = 0;      // the next read of `order` a reader takes
  size_t consumed = 0;  // reads the caller is done with
  // Readers take the reads in order, read k into slot k % slots once the
  // caller is done with read k - slots, which held it: plan_->in_flight at
  // a time, arriving in about the order the caller uses them (in that
  // order), so the first are placed while the disk reads the next.
  auto reader = [&] {
    for (;;) {
      size_t k;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return stop || next == order.size() || next < consumed + slots; });
        if (stop || next == order.size()) return;
        k = next++;
      }
      const size_t w = k % slots, i = order[k];
      // A slot that still holds read i, verified, from the last Run (Load's
      // verifying pass) is used as it is: the file is not read again.
      const bool resident = resident_[w] == i;
      bool direct = true;
      absl::Status status =
          resident ? absl::OkStatus() : ReadAndVerify(reads[i], (*buffers_)[w], direct);
      std::lock_guard lock(mu);
      all_direct_ = all_direct_ && direct;
      resident_[w] = status.ok() ? i : kNone;
      slot[w].status = std::move(status);
      slot[w].read = !resident;
      slot[w].ready = true;
      cv.notify_all();
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < plan_->in_flight; ++t) threads.emplace_back(reader);
  absl::Status status;
  for (size_t k = 0; k < order.size() && status.ok(); ++k) {
    const size_t i = order[k];
    Slot& s = slot[k % slots];
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return s.ready; });
    }
    status = s.status.ok() ? consume(reads[i], (*buffers_)[k % slots]) : s.status;
    if (status.ok() && s.read) bytes_read_ += reads[i].end - reads[i].begin;
    std::lock_guard lock(mu);
    s.ready = false;
    ++consumed;
    stop = !status.ok();
    cv.notify_all();
  }
  for (std::thread& t : threads) t.join();
  return status;
}

}  // namespace zero::checkpoint
