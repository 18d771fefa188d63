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

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zero {

class Event {
 public:
  virtual ~Event() = default;
  // True once all work before Record() has finished.
  virtual bool Query() const = 0;
  // Blocks the calling thread until Query() is true.
  virtual absl::Status Synchronize() const = 0;
};

class Stream {
 public:
  virtual ~Stream() = default;

  virtual int device() const = 0;

  // Runs `fn` on the host after all earlier work on this stream. On a card it
  // is a host callback: neither it nor the destruction of what it captures
  // may call CUDA (hold no last reference to a card event or buffer); on
  // meta it runs at once.
  virtual absl::Status Enqueue(absl::AnyInvocable<void() &&> fn) = 0;

  // Copies or fills bytes, ordered with the rest of the stream's work.
  virtual absl::Status Copy(void* dst, const void* src, size_t bytes) = 0;
  virtual absl::Status Fill(void* dst, unsigned char value, size_t bytes) = 0;
  // Copies from memory the caller owns: ordinary (pageable) host memory it
  // may reuse as soon as this returns, like cudaMemcpyAsync from pageable
  // memory (the bytes are staged, the copy to `dst` stays ordered on the
  // stream), or, on a card, card memory of another allocator (a framework's
  // tensor), read in stream order like Copy: keep it until the stream ran
  // the copy. The default copies and synchronizes (correct, but the host
  // waits).
  virtual absl::Status CopyFromPageable(void* dst, const void* src, size_t bytes) {
    absl::Status copied = Copy(dst, src, bytes);
    return copied.ok() ? Synchronize() : copied;
  }

  virtual absl::StatusOr<std::shared_ptr<Event>> Record() = 0;
  // Work enqueued after this call waits for `event`, which may come from
  // another stream of the same backend.
  virtual absl::Status Wait(const std::shared_ptr<Event>& event) = 0;
  // Blocks until everything enqueued so far has finished.
  virtual absl::Status Synchronize() = 0;

  // cudaStream_t on cards, nullptr elsewhere; null on a card too for CUDA's
  // legacy default stream, so ask is_card(), not the handle, which kind it is.
  virtual void* native_handle() const { return nullptr; }
  // A card's stream: its work runs on the card, and a host callback on it
  // must not block on other CUDA work. False for host and meta streams.
  virtual bool is_card() const { return false; }
  // The device's number outside this library (Backend::native_id): the CUDA
  // card number on cards, device() elsewhere.
  virtual int native_device() const { return device(); }
};

}  // namespace zero
