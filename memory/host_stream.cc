#include "memory/host_stream.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>


namespace zero {
namespace {

class CompletedEvent final : public Event {
 public:
  bool Query() const override { return true; }
  absl::Status DoSynchronize() const override { return absl::OkStatus(); }
};

std::atomic<HostWaitFilter> wait_filter{nullptr};

// Shared by every record that has nothing to wait for: no allocation.
const std::shared_ptr<Event>& Completed() {
  static const std::shared_ptr<Event>* const completed =
      new std::shared_ptr<Event>(std::make_shared<CompletedEvent>());
  return *completed;
}

}  // namespace

void SetHostWaitFilter(HostWaitFilter filter) {
  wait_filter.store(filter, std::memory_order_release);
}

void HostProgress::Advance() {
  {
    // Under the lock, so a waiter between its check and its sleep cannot
    // miss the notification.
    MutexLock lock(mu_);
    done_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
}

void HostProgress::WaitFor(uint64_t ticket) const {
  if (done() >= ticket) return;
  MutexLock lock(mu_);
  lock.Await(cv_, [&] { return done() >= ticket; });
}

absl::Status HostEvent::DoSynchronize() const {
  progress_->WaitFor(ticket());
  return absl::OkStatus();
}

HostStream::HostStream(int device, HostStreamOptions options, int index)
    : device_(device),
      delayed_(options.delayed()),
      delays_(options, device, index),
      worker_({.before =
                   [this] {
                     const absl::Duration delay = delays_.Next();
                     if (delay > absl::ZeroDuration()) absl::SleepFor(delay);
                   },
               .after = [this] { progress_->Advance(); }},
              "zero-stream") {}

HostStream::~HostStream() {
  MutexLock lock(mu_);
  stopping_ = true;  // worker_ then runs what is enqueued, and joins
}

absl::Status HostStream::DoEnqueue(absl::AnyInvocable<void() &&> fn) {
  MutexLock lock(mu_);
  if (stopping_) return absl::FailedPreconditionError("stream is shutting down");
  worker_.Post(std::move(fn));
  enqueued_.fetch_add(1, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status HostStream::DoCopy(void* dst, const void* src, size_t bytes) {
  return DoEnqueue([dst, src, bytes] { std::memmove(dst, src, bytes); });
}

absl::Status HostStream::DoCopyFromPageable(void* dst, const void* src, size_t bytes) {
  // On an idle stream the copy may as well run now: it is what the worker
  // would do next, and it saves staging (a second copy and an allocation).
  // Never in the delay mode, whose point is that work runs late.
  if (!delayed_ && progress_->done() >= enqueued_.load(std::memory_order_acquire)) {
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  Staging staged = TakeStaging(bytes);
  std::memcpy(staged.data.get(), src, bytes);
  return DoEnqueue([this, dst, staged = std::move(staged), bytes]() mutable {
    std::memcpy(dst, staged.data.get(), bytes);
    ReturnStaging(std::move(staged));
  });
}

// The smallest idle buffer that fits, else a new one.
HostStream::Staging HostStream::TakeStaging(size_t bytes) {
  {
    MutexLock lock(staging_mu_);
    auto best = staging_.end();
    for (auto it = staging_.begin(); it != staging_.end(); ++it) {
      if (it->capacity >= bytes && (best == staging_.end() || it->capacity < best->capacity)) {
        best = it;
      }
    }
    if (best != staging_.end()) {
      Staging s = std::move(*best);
      staging_.erase(best);
      return s;
    }
  }
  counts().DriverCall();  // what cudaHostAlloc is on a card
  return Staging{std::unique_ptr<char[]>(new char[bytes]), bytes};
}

// Kept for the next copy unless kMaxIdleStaging buffers already wait; then
// the smallest goes.
void HostStream::ReturnStaging(Staging staging) {
  MutexLock lock(staging_mu_);
  staging_.push_back(std::move(staging));
  if (staging_.size() > kMaxIdleStaging) {
    auto smallest = std::min_element(
        staging_.begin(), staging_.end(),
        [](const Staging& a, const Staging& b) { return a.capacity < b.capacity; });
    staging_.erase(smallest);
  }
}

absl::Status HostStream::DoFill(void* dst, unsigned char value, size_t bytes) {
  return DoEnqueue([dst, value, bytes] { std::memset(dst, value, bytes); });
}

absl::StatusOr<std::shared_ptr<Event>> HostStream::DoRecord() {
  // Everything enqueued before this call is done: nothing to mark. (Work
  // enqueued concurrently is not "before" it.)
  if (progress_->done() >= enqueued_.load(std::memory_order_acquire)) return Completed();
  MutexLock lock(mu_);
  absl::StatusOr<std::shared_ptr<HostEvent>> event = events_.Acquire(
      [this]() -> absl::StatusOr<std::shared_ptr<HostEvent>> {
        counts().DriverCall();  // what cudaEventCreate is on a card
        return std::make_shared<HostEvent>(progress_, shared_counts());
      });
  if (!event.ok()) return event.status();
  (*event)->Rearm(enqueued_.load(std::memory_order_relaxed));
  return std::shared_ptr<Event>(*std::move(event));
}

absl::Status HostStream::DoWait(const std::shared_ptr<Event>& event) {
  if (event == nullptr) return absl::InvalidArgumentError("Wait on a null event");
  const HostWaitFilter filter = wait_filter.load(std::memory_order_acquire);
  if (filter != nullptr && filter(this)) return absl::OkStatus();
  if (event->Query()) return absl::OkStatus();
  // The worker waits, not the caller: what cudaStreamWaitEvent is on a card,
  // so not counted as a host wait.
  if (const auto* host = dynamic_cast<const HostEvent*>(event.get())) {
    return DoEnqueue([mark = host->mark()] { mark.Await(); });
  }
  return DoEnqueue([event] { (void)event->Synchronize(); });
}

absl::Status HostStream::DoSynchronize() {
  progress_->WaitFor(enqueued_.load(std::memory_order_acquire));
  return absl::OkStatus();
}

size_t HostStream::events_created() {
  MutexLock lock(mu_);
  return events_.created();
}

absl::Status MetaStream::DoEnqueue(absl::AnyInvocable<void() &&> fn) {
  std::move(fn)();
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Event>> MetaStream::DoRecord() { return Completed(); }

}  // namespace zero
