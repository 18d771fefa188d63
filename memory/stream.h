// Streams and events: one interface over CUDA streams (cards), ordered
// executors (host devices) and no-ops (meta devices).
//
// Work enqueued on one stream runs in order. An event marks everything
// enqueued on its stream before Record(); Wait(event) makes later work on
// another stream start only after that. Streams are owned by the
// DeviceSystem and live until it is destroyed. All methods are thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "memory/stream_counts.h"

namespace zero {

class Event {
 public:
  // `counts`: where Synchronize counts its host wait (the recording stream's;
  // null for events that never block, like an always-complete one).
  explicit Event(std::shared_ptr<StreamCounts> counts = nullptr) : counts_(std::move(counts)) {}
  virtual ~Event() = default;
  // True once all work before Record() has finished.
  virtual bool Query() const = 0;
  // Blocks the calling thread until Query() is true.
  absl::Status Synchronize() const {
    if (counts_ != nullptr) counts_->HostWait();
    return DoSynchronize();
  }

 private:
  virtual absl::Status DoSynchronize() const = 0;
  const std::shared_ptr<StreamCounts> counts_;
};

// The verbs are non-virtual so that every backend's work is counted in one
// place (stream_counts.h); a backend implements the Do* functions.
class Stream {
 public:
  virtual ~Stream() = default;

  virtual int device() const = 0;

  // Runs `fn` on the host after all earlier work on this stream. On a card it
  // is a host callback: neither it nor the destruction of what it captures
  // may call CUDA (hold no last reference to a card event or buffer); on
  // meta it runs at once.
  absl::Status Enqueue(absl::AnyInvocable<void() &&> fn) {
    return Counted(DoEnqueue(std::move(fn)));
  }

  // Copies or fills bytes, ordered with the rest of the stream's work.
  absl::Status Copy(void* dst, const void* src, size_t bytes) {
    return Counted(DoCopy(dst, src, bytes));
  }
  absl::Status Fill(void* dst, unsigned char value, size_t bytes) {
    return Counted(DoFill(dst, value, bytes));
  }
  // Copies from ordinary (pageable) host memory the caller may reuse as
  // soon as this returns, like cudaMemcpyAsync from pageable memory (the
  // bytes are staged, the copy to `dst` stays ordered on the stream). For
  // card memory of another allocator (a framework's tensor) use Copy: it is
  // read in stream order. The default copies and synchronizes (correct,
  // but the host waits).
  absl::Status CopyFromPageable(void* dst, const void* src, size_t bytes) {
    return Counted(DoCopyFromPageable(dst, src, bytes));
  }

  absl::StatusOr<std::shared_ptr<Event>> Record() { return DoRecord(); }
  // Work enqueued after this call waits for `event`, which may come from
  // another stream of the same backend.
  absl::Status Wait(const std::shared_ptr<Event>& event) { return DoWait(event); }
  // Blocks until everything enqueued so far has finished.
  absl::Status Synchronize() {
    counts_->HostWait();
    return DoSynchronize();
  }

  // cudaStream_t on cards, nullptr elsewhere; null on a card too for CUDA's
  // legacy default stream, so ask is_card(), not the handle, which kind it is.
  virtual void* native_handle() const { return nullptr; }
  // A card's stream: its work runs on the card, and a host callback on it
  // must not block on other CUDA work. False for host and meta streams.
  virtual bool is_card() const { return false; }
  // The device's number outside this library (Backend::native_id): the CUDA
  // card number on cards, device() elsewhere.
  virtual int native_device() const { return device(); }

  // Where this stream counts its work: its own counts until the DeviceSystem
  // shares its device's (CountInto, before the stream's first use).
  StreamCounts& counts() const { return *counts_; }
  const std::shared_ptr<StreamCounts>& shared_counts() const { return counts_; }
  void CountInto(std::shared_ptr<StreamCounts> counts) { counts_ = std::move(counts); }

 private:
  absl::Status Counted(absl::Status enqueued) {
    if (enqueued.ok()) counts_->Enqueued();
    return enqueued;
  }

  virtual absl::Status DoEnqueue(absl::AnyInvocable<void() &&> fn) = 0;
  virtual absl::Status DoCopy(void* dst, const void* src, size_t bytes) = 0;
  virtual absl::Status DoFill(void* dst, unsigned char value, size_t bytes) = 0;
  virtual absl::Status DoCopyFromPageable(void* dst, const void* src, size_t bytes) {
    absl::Status copied = DoCopy(dst, src, bytes);
    if (!copied.ok()) return copied;
    counts_->HostWait();
    return DoSynchronize();
  }
  virtual absl::StatusOr<std::shared_ptr<Event>> DoRecord() = 0;
  virtual absl::Status DoWait(const std::shared_ptr<Event>& event) = 0;
  virtual absl::Status DoSynchronize() = 0;

  std::shared_ptr<StreamCounts> counts_ = std::make_shared<StreamCounts>();
};

}  // namespace zero
