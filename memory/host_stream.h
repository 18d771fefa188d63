// Streams for host and meta devices.
//
// HostStream is an ordered executor: one worker thread (base/serial_queue.h)
// runs enqueued work in order, so an event recorded on one stream and waited on by another really
// orders work, as on a card. With HostStreamOptions' delay mode
// (memory/stream_delay.h) the worker sleeps a seeded random time before each
// task, so missing waits show up. MetaStream does nothing: meta devices have
// no bytes, so there is nothing to order; host functions run at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "base/serial_queue.h"
#include "memory/event_pool.h"
#include "memory/stream.h"
#include "memory/stream_delay.h"

namespace zero {

// How far one host stream has got: the number of its tasks finished, in
// order. Shared with the stream's events, so they outlive the stream.
class HostProgress {
 public:
  uint64_t done() const { return done_.load(std::memory_order_acquire); }
  void Advance();  // one more task finished
  void WaitFor(uint64_t ticket) const;

 private:
  mutable Mutex mu_;
  mutable std::condition_variable cv_;
  std::atomic<uint64_t> done_{0};
};

// "The first `ticket` tasks of a stream": complete once the stream's progress
// reaches it. Reusable: the stream re-arms it with a later ticket when no one
// holds it any more (EventPool), so a record allocates nothing.
class HostEvent final : public Event {
 public:
  HostEvent(std::shared_ptr<const HostProgress> progress, std::shared_ptr<StreamCounts> counts)
      : Event(std::move(counts)), progress_(std::move(progress)) {}
  bool Query() const override { return progress_->done() >= ticket(); }
  void Rearm(uint64_t ticket) { ticket_.store(ticket, std::memory_order_release); }
  // What a waiting stream keeps: the record as it is now, not the event
  // (as cudaStreamWaitEvent binds to the current record), so the event goes
  // back to its pool at once, however long the wait is queued.
  struct Mark {
    std::shared_ptr<const HostProgress> progress;
    uint64_t ticket;
    void Await() const { progress->WaitFor(ticket); }
  };
  Mark mark() const { return {progress_, ticket()}; }

 private:
  absl::Status DoSynchronize() const override;
  uint64_t ticket() const { return ticket_.load(std::memory_order_acquire); }
  const std::shared_ptr<const HostProgress> progress_;
  std::atomic<uint64_t> ticket_{0};
};

// A test's hook into every host stream's Wait (memory/testing/
// stream_faults.h sets it, so production code links no fault injection):
// true makes that wait order nothing. Null, the default, costs one atomic
// load per Wait. Process-wide; thread-safe.
using HostWaitFilter = bool (*)(const Stream* stream);
void SetHostWaitFilter(HostWaitFilter filter);

class HostStream final : public Stream {
 public:
  // `index`: the stream's place on its device, which picks its delays.
  explicit HostStream(int device, HostStreamOptions options = {}, int index = 0);
  ~HostStream() override;  // runs what is enqueued, then joins the worker

  int device() const override { return device_; }
  // Events Record() had to make; the rest were recycled.
  size_t events_created();

 private:
  absl::Status DoEnqueue(absl::AnyInvocable<void() &&> fn) override;
  absl::Status DoCopy(void* dst, const void* src, size_t bytes) override;
  absl::Status DoFill(void* dst, unsigned char value, size_t bytes) override;
  // Stages the bytes in a heap copy the task owns (no wait), or copies at
  // once when the stream is idle.
  absl::Status DoCopyFromPageable(void* dst, const void* src, size_t bytes) override;
  // Enqueues nothing: the event is a ticket into this stream's progress
  // (on an idle stream, one shared complete event).
  absl::StatusOr<std::shared_ptr<Event>> DoRecord() override;
  // A no-op when the HostWaitFilter says so.
  absl::Status DoWait(const std::shared_ptr<Event>& event) override;
  absl::Status DoSynchronize() override;

  // CopyFromPageable's staging buffers are recycled, so a busy stream's
  // copies neither allocate nor fault in fresh pages each time.
  struct Staging {
    std::unique_ptr<char[]> data;
    size_t capacity = 0;
  };
  static constexpr size_t kMaxIdleStaging = 8;
  Staging TakeStaging(size_t bytes);
  void ReturnStaging(Staging staging);

  const int device_;
  const bool delayed_;
  DelaySequence delays_;  // drawn by the worker only
  const std::shared_ptr<HostProgress> progress_ = std::make_shared<HostProgress>();
  // Orders posting with counting, so a ticket names the tasks before it.
  Mutex mu_;
  // Tasks enqueued so far; written under mu_, read without it by Record's
  // idle check.
  std::atomic<uint64_t> enqueued_{0};
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  EventPool<HostEvent> events_ ABSL_GUARDED_BY(mu_);
  Mutex staging_mu_;
  std::vector<Staging> staging_ ABSL_GUARDED_BY(staging_mu_);
  // Last: its thread starts once the rest is built and stops first.
  SerialQueue worker_;
};

class MetaStream final : public Stream {
 public:
  explicit MetaStream(int device) : device_(device) {}
  int device() const override { return device_; }

 private:
  absl::Status DoEnqueue(absl::AnyInvocable<void() &&> fn) override;
  absl::Status DoCopy(void*, const void*, size_t) override { return absl::OkStatus(); }
  absl::Status DoFill(void*, unsigned char, size_t) override { return absl::OkStatus(); }
  absl::Status DoCopyFromPageable(void*, const void*, size_t) override { return absl::OkStatus(); }
  // One shared, always complete event: nothing to allocate.
  absl::StatusOr<std::shared_ptr<Event>> DoRecord() override;
  absl::Status DoWait(const std::shared_ptr<Event>&) override { return absl::OkStatus(); }
  absl::Status DoSynchronize() override { return absl::OkStatus(); }

  const int device_;
};

}  // namespace zero
