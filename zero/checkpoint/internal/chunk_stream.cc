#include "zero/checkpoint/internal/chunk_stream.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "zero/checkpoint/internal/data_file.h"
#include "zero/checkpoint/internal/verified_reader.h"

namespace zero::checkpoint {
namespace {

absl::StatusOr<std::unique_ptr<DirectFile>> OpenChecked(const std::string& folder,
                                                        const Manifest& manifest, int index) {
  const std::string path = absl::StrCat(folder, "/", manifest.files[index].name);
  ASSIGN_OR_RETURN(DirectFile file, DirectFile::Open(path, FileMode::kRead));
  ASSIGN_OR_RETURN(uint64_t size, file.Size());
  std::string header(size >= kDataHeaderBytes ? kDataHeaderBytes : 0, '\0');
  RETURN_IF_ERROR(file.ReadAt(0, header.data(), header.size()));
  RETURN_IF_ERROR(CheckDataFile(manifest, index, size, header, path));
  return std::make_unique<DirectFile>(std::move(file));
}

// The outcome of the read in one staging buffer.
struct Slot {
  bool ready = false;
  bool read = false;  // from the file this Run (else still in the slot from the last)
  absl::Status status;
};

}  // namespace

absl::StatusOr<ChunkStream> ChunkStream::Open(const std::string& folder, const Manifest& manifest,
                                              const LoadPlan& plan, DeviceSystem& devices) {
  ChunkStream stream(manifest, plan, devices);
  for (const ChunkRead& read : plan.reads) {
    if (stream.files_[read.file] != nullptr) continue;
    ASSIGN_OR_RETURN(stream.files_[read.file], OpenChecked(folder, manifest, read.file));
  }
  return stream;
}

bool ChunkStream::direct() const {
  for (const auto& file : files_) {
    if (file != nullptr && !file->direct()) return false;
  }
  return true;
}

absl::Status ChunkStream::ReadAndVerify(const ChunkRead& read, std::byte* buffer) {
  DirectFile& file = *files_[read.file];
  RETURN_IF_ERROR(file.ReadAt(read.begin, buffer, read.end - read.begin));
  for (const Placement& p : read.placements) {
    RETURN_IF_ERROR(
        CheckChunk(file.path(), *p.param, *p.chunk, buffer + (p.chunk->offset - read.begin)));
  }
  return absl::OkStatus();
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
  std::vector<Slot> slot(slots);

  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  // Reader w fills slot w with reads w, w + slots, ...; the caller drains
  // the slots in read order, so reads complete out of order but are used in order.
  auto reader = [&](int w) {
    for (size_t i = w; i < reads.size(); i += slots) {
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return stop || !slot[w].ready; });
        if (stop) return;
      }
      // A slot that still holds read i, verified, from the last Run (Load's
      // verifying pass) is used as it is: the file is not read again.
      const bool resident = resident_[w] == i;
      absl::Status status = resident ? absl::OkStatus() : ReadAndVerify(reads[i], (*buffers_)[w]);
      resident_[w] = status.ok() ? i : kNone;
      std::lock_guard lock(mu);
      slot[w].status = std::move(status);
      slot[w].read = !resident;
      slot[w].ready = true;
      cv.notify_all();
    }
  };
  std::vector<std::thread> threads;
  for (int w = 0; w < slots; ++w) threads.emplace_back(reader, w);
  absl::Status status;
  for (size_t i = 0; i < reads.size() && status.ok(); ++i) {
    Slot& s = slot[i % slots];
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return s.ready; });
    }
    status = s.status.ok() ? consume(reads[i], (*buffers_)[i % slots]) : s.status;
    if (status.ok() && s.read) bytes_read_ += reads[i].end - reads[i].begin;
    std::lock_guard lock(mu);
    s.ready = false;
    stop = !status.ok();
    cv.notify_all();
  }
  for (std::thread& t : threads) t.join();
  return status;
}

}  // namespace zero::checkpoint
