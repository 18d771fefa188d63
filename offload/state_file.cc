#include "offload/state_file.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <future>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/crc32c.h"
#include "base/status_macros.h"
#include "memory/tag.h"

namespace zero {
namespace {

constexpr int kBuffers = StateFile::kStagingBuffers;
constexpr size_t kAhead = 2;  // reads ahead; the rest: the caller's chunk, two writing behind
// Elements per fn call of a writing pass: the planes of one block (768 KiB
// for three) stay in the cores' caches until their CRC is taken, and fn
// still gets enough to split across threads (compute/parallel.h).
constexpr size_t kChecksumBlock = size_t{1} << 16;

}  // namespace

absl::StatusOr<std::unique_ptr<StateFile>> StateFile::Create(int planes, std::vector<size_t> ranges,
                                                             MemoryResource* staging,
                                                             StateFileOptions options) {
  if (planes <= 0 || options.chunk_elements == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "state file: needs at least one plane and chunk (got %d planes, %d elements a chunk)",
        planes, options.chunk_elements));
  }
  if (options.has_bytes && staging == nullptr) {
    return absl::InvalidArgumentError("state file: needs host memory for its staging buffers");
  }
  // A chunk's bytes (planes x elements x 4, padded) must not wrap around.
  if (options.chunk_elements > (std::numeric_limits<size_t>::max() / 2) / sizeof(float) /
                                   static_cast<size_t>(planes)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "state file: chunks of %d elements x %d planes do not fit in memory",
        options.chunk_elements, planes));
  }
  // No chunk longer than the longest range: the staging (kBuffers chunks)
  // of a small model's state is then small too, not 5 x planes x the default.
  const size_t longest = ranges.empty() ? 0 : *std::max_element(ranges.begin(), ranges.end());
  if (longest > 0) options.chunk_elements = std::min(options.chunk_elements, longest);
  // One file per state file: ranks and engines of one process never share one.
  static std::atomic<int> instances{0};
  const std::string name = absl::StrFormat("zero-optimizer-%d-%d.swap", getpid(), instances++);
  ASSIGN_OR_RETURN(std::unique_ptr<NvmeStore> store,
                   NvmeStore::Create(options.folder, name,
                                     {.has_bytes = options.has_bytes,
                                      .direct = options.direct_io,
                                      .write_fault = options.write_fault}));
  std::unique_ptr<SerialQueue> io;
  if (options.has_bytes) {
    ASSIGN_OR_RETURN(io, SerialQueue::Create({}, "zero-io"));
  }
  std::unique_ptr<StateFile> file(new StateFile(planes, options.chunk_elements, std::move(store),
                                                std::move(io), staging, options.has_bytes));
  // On meta devices too, when given memory: the books then show the staging.
  if (staging != nullptr) {
    const size_t bytes = NvmeStore::Padded(planes * options.chunk_elements * sizeof(float));
    for (int b = 0; b < kBuffers; ++b) {
      ASSIGN_OR_RETURN(void* buffer, staging->Allocate(bytes, Tag::kOptimizerState, nullptr,
                                                       NvmeStore::kAlignment));
      file->buffers_.push_back(buffer);
    }
    if (options.has_bytes) file->held_.resize(kBuffers);
  }
  for (size_t elements : ranges) RETURN_IF_ERROR(file->AddRange(elements));
  RETURN_IF_ERROR(file->ZeroFill());
  return file;
}

StateFile::StateFile(int planes, size_t chunk_elements, std::unique_ptr<NvmeStore> store,
                     std::unique_ptr<SerialQueue> io, MemoryResource* staging, bool has_bytes)
    : planes_(planes),
      chunk_elements_(chunk_elements),
      store_(std::move(store)),
      io_(std::move(io)),
      staging_(staging),
      has_bytes_(has_bytes) {}

StateFile::~StateFile() {
  io_.reset();  // its last requests may use the buffers
  const size_t bytes = NvmeStore::Padded(planes_ * chunk_elements_ * sizeof(float));
  for (void* buffer : buffers_) (void)staging_->Deallocate(buffer, bytes, nullptr);
}

absl::Status StateFile::AddRange(size_t elements) {
  std::vector<Chunk> chunks;
  for (size_t first = 0; first < elements; first += chunk_elements_) {
    Chunk c{.first = first, .count = std::min(chunk_elements_, elements - first), .slot = 0};
    ASSIGN_OR_RETURN(c.slot, store_->Allocate(planes_ * c.count * sizeof(float)));
    chunks.push_back(c);
  }
  elements_.push_back(elements);
  chunks_.push_back(std::move(chunks));
  return absl::OkStatus();
}

absl::Status StateFile::ZeroFill() {
  for (int r = 0; r < range_count(); ++r) {
    RETURN_IF_ERROR(Run(r, Pass::kWrite, [](size_t, size_t count, std::span<float* const> p) {
      for (float* plane : p) std::memset(plane, 0, count * sizeof(float));
      return absl::OkStatus();
    }));
  }
  return absl::OkStatus();
}

template <typename Request>
std::future<absl::Status> StateFile::Issue(Request request) {
  if (io_ != nullptr) return io_->Submit(std::move(request));
  std::promise<absl::Status> done;  // meta devices: books only, at once
  done.set_value(request());
  return done.get_future();
}

// The pipeline over chunks [first, last] of one range: buffer (base + j -
// first) % kBuffers holds chunk j (base 0, or where a read-only pass finds
// its first chunks in staging); before chunk j+kAhead is read into a
// buffer, that buffer's write (chunk j+kAhead-kBuffers, issued two chunks
// earlier) must be done. Writes go to fresh slots, adopted at the end.
absl::Status StateFile::CheckRange(int range, size_t begin, size_t count) const {
  if (range >= 0 && range < range_count() && begin + count <= elements_[range] &&
      begin + count >= begin) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "state file %s: elements [%d, %d) of range %d are outside it (%d ranges%s)", path(), begin,
      begin + count, range, range_count(),
      range >= 0 && range < range_count()
          ? absl::StrFormat(", that one has %d elements", elements_[range])
          : ""));
}

absl::Status StateFile::Run(int range, size_t begin, size_t count, Pass pass, ChunkFn fn) {
  RETURN_IF_ERROR(CheckRange(range, begin, count));
  if (count == 0) return absl::OkStatus();
  std::vector<Chunk>& chunks = chunks_[range];
  const size_t first = begin / chunk_elements_, last = (begin + count - 1) / chunk_elements_;
  const bool writes = pass != Pass::kRead;
  const size_t base = writes ? 0 : FirstBuffer(range, first, last);
  auto index = [&](size_t j) { return (base + j - first) % kBuffers; };
  std::vector<std::optional<uint64_t>> fresh(last - first + 1);
  std::array<InFlight, kBuffers> in_flight;  // per buffer
  absl::Status status;
  auto buffer = [&](size_t j) { return has_bytes_ ? buffers_[index(j)] : nullptr; };
  auto settle = [&](size_t b) {
    status.Update(Settle(in_flight[b], has_bytes_ ? buffers_[b] : nullptr));
  };
  auto read = [&](size_t j) {
    const Chunk& c = chunks[j];
    const bool whole = begin <= c.first && c.first + c.count <= begin + count;
    if (pass == Pass::kWrite && whole) return;  // overwritten entirely: nothing to read
    if (!writes && Holds(index(j), range, j)) return;
    if (has_bytes_) held_[index(j)] = {range, j, c.version};
    InFlight& f = in_flight[index(j)];
    f.read_slot = c.slot;
    f.done = Issue([this, &f, to = buffer(j)] {
      absl::StatusOr<uint32_t> read = store_->ReadUnchecked(f.read_slot, to);
      if (read.ok()) f.read_crc = *read;
      return read.status();
    });
  };
  for (size_t j = first; j < first + kAhead && j <= last; ++j) read(j);
  for (size_t j = first; j <= last; ++j) {
    const size_t b = index(j);
    if (j + kAhead <= last) {
      // Chunk j+kAhead's buffer was chunk j+kAhead-kBuffers's, written behind since.
      settle(index(j + kAhead));
      if (status.ok()) read(j + kAhead);
    }
    settle(b);
    if (!status.ok()) break;
    const Chunk& c = chunks[j];
    const size_t lo = std::max(begin, c.first), hi = std::min(begin + count, c.first + c.count);
    if (has_bytes_ && writes) held_[b] = {};  // changed: current again once adopted
    absl::StatusOr<std::optional<uint32_t>> checksum = Hand(c, lo, hi, buffer(j), writes, fn);
    if (!checksum.ok()) {
      status = checksum.status();
      break;
    }
    if (!writes) continue;
    absl::StatusOr<uint64_t> slot = store_->Allocate(planes_ * c.count * sizeof(float));
    if (!slot.ok()) {
      status = slot.status();
      break;
    }
    fresh[j - first] = *slot;
    in_flight[b].done = Issue([this, slot = *slot, from = buffer(j), checksum = *checksum] {
      return store_->Write(slot, from, checksum);
    });
  }
  for (size_t b = 0; b < kBuffers; ++b) settle(b);
  if (writes) Adopt(chunks, first, fresh, status.ok());
  Remember(range, first, last, base, status.ok());
  return status;
}

absl::Status StateFile::Settle(InFlight& request, const void* buffer) const {
  if (!request.done.valid()) return absl::OkStatus();
  absl::Status status = request.done.get();
  std::optional<uint32_t> crc = std::exchange(request.read_crc, std::nullopt);
  if (!status.ok() || !crc.has_value()) return status;
  return store_->CheckRead(request.read_slot, buffer, *crc);
}

absl::StatusOr<std::optional<uint32_t>> StateFile::Hand(const Chunk& c, size_t lo, size_t hi,
                                                        void* buffer, bool writes,
                                                        ChunkFn fn) const {
  if (!has_bytes_) return std::nullopt;
  if (writes) {
    ASSIGN_OR_RETURN(const uint32_t crc, UpdateAndChecksum(c, lo, hi, buffer, fn));
    return crc;
  }
  std::vector<float*> planes(planes_);
  for (int p = 0; p < planes_; ++p) {
    planes[p] = static_cast<float*>(buffer) + p * c.count + (lo - c.first);
  }
  RETURN_IF_ERROR(fn(lo, hi - lo, planes));
  return std::nullopt;
}

absl::StatusOr<uint32_t> StateFile::UpdateAndChecksum(const Chunk& c, size_t lo, size_t hi,
                                                      void* buffer, ChunkFn fn) const {
  auto plane = [&](int p) { return static_cast<float*>(buffer) + p * c.count - c.first; };
  std::vector<uint32_t> crc(planes_, 0);
  auto extend = [&](size_t from, size_t to) {
    for (int p = 0; p < planes_; ++p) {
      crc[p] = Crc32cExtend(crc[p], plane(p) + from, (to - from) * sizeof(float));
    }
  };
  extend(c.first, lo);  // a partial pass: what it leaves as read
  std::vector<float*> planes(planes_);
  for (size_t at = lo; at < hi; at += kChecksumBlock) {
    const size_t n = std::min(kChecksumBlock, hi - at);
    for (int p = 0; p < planes_; ++p) planes[p] = plane(p) + at;
    RETURN_IF_ERROR(fn(at, n, planes));
    extend(at, at + n);
  }
  extend(hi, c.first + c.count);
  // The slot holds the planes one after another.
  uint32_t slot_crc = crc[0];
  for (int p = 1; p < planes_; ++p) {
    slot_crc = Crc32cCombine(slot_crc, crc[p], c.count * sizeof(float));
  }
  return slot_crc;
}

bool StateFile::Holds(size_t buffer, int range, size_t chunk) const {
  if (!has_bytes_) return false;
  const Held& h = held_[buffer];
  return h.range == range && h.chunk == chunk && h.version == chunks_[range][chunk].version;
}

size_t StateFile::FirstBuffer(int range, size_t first, size_t last) const {
  size_t best = 0, best_hits = 0;
  for (size_t base = 0; base < kBuffers; ++base) {
    size_t hits = 0;
    for (size_t j = first; j <= std::min(last, first + kBuffers - 1); ++j) {
      hits += Holds((base + j - first) % kBuffers, range, j);
    }
    if (hits > best_hits) best = base, best_hits = hits;
  }
  return best;
}

// After a pass the buffers of its last chunks hold them as the file now
// does; after a failure nothing is known.
void StateFile::Remember(int range, size_t first, size_t last, size_t base, bool ok) {
  if (!has_bytes_) return;
  if (!ok) {
    held_.assign(held_.size(), Held{});
    return;
  }
  for (size_t j = last + 1 - std::min<size_t>(last - first + 1, kBuffers); j <= last; ++j) {
    held_[(base + j - first) % kBuffers] = {range, j, chunks_[range][j].version};
  }
}

// After a whole pass the chunks move to their new slots; otherwise the new
// slots go and the old ones stay.
void StateFile::Adopt(std::vector<Chunk>& chunks, size_t first,
                      const std::vector<std::optional<uint64_t>>& fresh, bool adopt) {
  for (size_t i = 0; i < fresh.size(); ++i) {
    if (!fresh[i].has_value()) continue;
    const uint64_t drop = adopt ? std::exchange(chunks[first + i].slot, *fresh[i]) : *fresh[i];
    if (adopt) ++chunks[first + i].version;
    (void)store_->Free(drop);
  }
}

StateFileStats StateFile::stats() const {
  const NvmeStoreStats s = store_->stats();
  StateFileStats out;
  out.file_bytes = s.file_bytes;
  for (size_t e : elements_) out.state_bytes += planes_ * e * sizeof(float);
  out.staging_bytes =
      buffers_.size() * NvmeStore::Padded(planes_ * chunk_elements_ * sizeof(float));
  out.bytes_read = s.bytes_read;
  out.bytes_written = s.bytes_written;
  return out;
}

}  // namespace zero
