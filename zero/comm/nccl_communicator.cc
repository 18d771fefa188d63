#include "zero/comm/nccl_communicator.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/mutex.h"
#include "base/status_macros.h"
#include "zero/comm/internal/call_history.h"
#include "zero/comm/internal/comm_errors.h"
#include "zero/comm/nccl_watchdog.h"

namespace zero::nccl {
namespace {

class NcclCommunicator;

// This thread's GroupStart nesting, and the communicators that enqueued a
// call since the outermost GroupStart: GroupEnd launches those calls, and a
// non-blocking communicator answers ncclInProgress until they are enqueued,
// so GroupEnd waits for each.
struct ThreadGroup {
  int depth = 0;
  std::vector<NcclCommunicator*> comms;
};
thread_local ThreadGroup thread_group;

// Thread-safety: Execute runs on the rank's thread; Abort and AsyncError may
// come from any thread; the watchdog thread polls every
// options.poll_interval. mu_ is held while NCCL calls are enqueued (brief:
// they are asynchronous) and while polling (never blocks), never while
// waiting on the stream, so Abort can interrupt a sequence check that waits
// for a missing rank, nor between the polls of a call that returned
// ncclInProgress, so Abort and the watchdog can end that wait too. After ncclCommAbort the comm is freed: nothing calls
// NCCL with it again (aborted_).
class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const NcclApi* api, ncclComm_t comm, int rank, int world_size,
                   std::unique_ptr<NcclRankDevice> device, std::unique_ptr<NcclSequenceCheck> check,
                   NcclOptions options)
      : api_(api),
        comm_(comm),
        rank_(rank),
        world_size_(world_size),
        device_(std::move(device)),
        check_(std::move(check)),
        options_(options),
        history_(static_cast<size_t>(options.check_every)),
        watchdog_(api, comm, rank, options.timeout),
        watcher_([this] { Watch(); }) {}

  ~NcclCommunicator() override {
    std::erase(thread_group.comms, this);  // destroyed inside this thread's group
    {
      MutexLock lock(mu_);
      closing_ = true;
    }
    wake_.notify_all();
    watcher_.join();
    const absl::Status card = device_->OnCard([this] {
      Close();
      return absl::OkStatus();
    });
    if (!card.ok()) {
      MutexLock lock(mu_);
      AbortLocked(card);
    }
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  void Abort(const absl::Status& reason) override {
    MutexLock lock(mu_);
    AbortLocked(reason.ok() ? absl::CancelledError("communicator aborted") : reason);
  }
  absl::Status AsyncError() const override {
    MutexLock lock(mu_);
    return PollLocked();
  }
  // After ncclGroupEnd (`ended`: its result) launched this communicator's
  // grouped calls: waits until it is no longer ncclInProgress, to the
  // timeout, then gives the calls to the watchdog; a failure aborts it.
  absl::Status EndGroup(const absl::Status& ended);

 protected:
  absl::Status Execute(const CollectiveCall& call, const void* send, void* recv, Stream* stream,
                       const absl::Status& invalid) override;

 private:
  absl::Status CheckStream(const CollectiveCall& call, Stream* stream) const;
  absl::Status ExecuteOnCard(const CollectiveCall& call, const void* send, void* recv,
                             cudaStream_t s, uint64_t seq, const absl::Status& bad);
  // With mu_ held, released between polls when NCCL answers ncclInProgress.
  absl::Status Issue(const CollectiveCall& call, const void* send, void* recv, cudaStream_t s) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // NCCL's `result` of `what` as a status; on ncclInProgress (a non-blocking
  // communicator still enqueueing) first waits until it is done or
  // `deadline`, without mu_ between polls, so that Abort and the watchdog can
  // end the wait (an Abort meanwhile freed the comm: its reason is returned).
  absl::Status AwaitLocked(ncclResult_t result, const std::string& what, absl::Time deadline) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Check(cudaStream_t stream);
  // The watchdog follows call `seq` from now: an event recorded on `s`.
  absl::Status WatchLocked(uint64_t seq, std::string call, cudaStream_t s)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // NCCL's teardown, with the card current: a failed communicator is
  // aborted; a healthy one finalized, then destroyed.
  void Close();
  // Poll keeps the first failure and aborts on it.
  absl::Status PollLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AbortLocked(absl::Status reason) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Watch();

  const NcclApi* const api_;
  const ncclComm_t comm_;
  const int rank_;
  const int world_size_;
  const std::unique_ptr<NcclRankDevice> device_;
  const std::unique_ptr<NcclSequenceCheck> check_;
  const NcclOptions options_;
  CallHistory history_;  // rank thread only

  mutable Mutex mu_;
  mutable NcclWatchdog watchdog_ ABSL_GUARDED_BY(mu_);
  mutable absl::Status poison_ ABSL_GUARDED_BY(mu_);  // the first failure
  mutable bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  mutable std::atomic<bool> stop_{false};  // set with poison_, read while waiting unlocked
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  // Calls issued inside a group on this rank's thread: NCCL launches them at
  // the outermost ncclGroupEnd, so an event recorded when they are issued
  // would precede them on the stream; they are watched from EndGroup.
  struct GroupedCall {
    uint64_t seq;
    std::string name;
    cudaStream_t stream;
  };
  std::vector<GroupedCall> grouped_ ABSL_GUARDED_BY(mu_);
  std::condition_variable wake_;
  std::thread watcher_;  // last: starts once the rest exists
};

void NcclCommunicator::AbortLocked(absl::Status reason) const {
  if (poison_.ok()) poison_ = std::move(reason);
  stop_ = true;
  if (!aborted_ && api_->CommAbort != nullptr) {
    aborted_ = true;
    api_->CommAbort(comm_);  // ends this rank's NCCL kernels, so its streams drain
  }
}

absl::Status NcclCommunicator::PollLocked() const {
  if (!poison_.ok() || aborted_) return poison_;
  // The markers are the card's CUDA events: queried or destroyed on a
  // thread with no card current (the watchdog's, a caller's of AsyncError),
  // the runtime would create a context on card 0 for them.
  absl::Status status = device_->OnCard(
      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return watchdog_.Poll(absl::Now()); });
  if (!status.ok()) AbortLocked(status);
  return status;
}

void NcclCommunicator::Watch() {
  MutexLock lock(mu_);
  while (!closing_ && !aborted_) {
    lock.WaitFor(wake_, absl::ToChronoNanoseconds(options_.poll_interval));
    if (!closing_) (void)PollLocked();
  }
}

absl::Status NcclCommunicator::Issue(const CollectiveCall& call, const void* send, void* recv,
                                     cudaStream_t s) const {
  const ncclDataType_t type = ToNccl(call.dtype);
  ncclResult_t result = ncclSuccess;
  switch (call.kind) {
    case CollectiveKind::kAllGather:
      result = api_->AllGather(send, recv, call.count, type, comm_, s);
      break;
    case CollectiveKind::kReduceScatter:
      result = api_->ReduceScatter(send, recv, call.count, type, ToNccl(call.op), comm_, s);
      break;
    case CollectiveKind::kAllReduce:
      result = api_->AllReduce(send, recv, call.count, type, ToNccl(call.op), comm_, s);
      break;
    case CollectiveKind::kBroadcast:
      result = api_->Broadcast(send, recv, call.count, type, call.root, comm_, s);
      break;
    case CollectiveKind::kAllToAll: {  // NCCL has none: a send and a receive per peer
      const size_t bytes = call.count * SizeOf(call.dtype);
      result = api_->GroupStart();
      for (int p = 0; p < world_size_ && result == ncclSuccess; ++p) {
        result = api_->Send(static_cast<const char*>(send) + p * bytes, call.count, type, p,
                            comm_, s);
        if (result == ncclSuccess) {
          result = api_->Recv(static_cast<char*>(recv) + p * bytes, call.count, type, p, comm_, s);
        }
      }
      const ncclResult_t ended = api_->GroupEnd();
      if (result == ncclSuccess) result = ended;
      break;
    }
    case CollectiveKind::kBarrier: {  // NCCL has none: a one-element all-reduce
                                      // orders the streams
      float* scratch = device_->scratch();
      result = api_->AllReduce(scratch, scratch, 1, ncclFloat32, ncclSum, comm_, s);
      break;
    }
  }
  // A non-blocking communicator may still be enqueueing (e.g. connecting).
  return AwaitLocked(result, absl::StrFormat("nccl%s on rank %d", Name(call.kind), rank_),
                     absl::Now() + options_.timeout);
}

absl::Status NcclCommunicator::AwaitLocked(ncclResult_t result, const std::string& what,
                                           absl::Time deadline) const {
  if (result != ncclInProgress) return NcclStatus(*api_, result, what.c_str());
  return AwaitComm(*api_, comm_, deadline, what,
                   [&](absl::Duration wait) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
                     mu_.Unlock();
                     absl::SleepFor(wait);
                     mu_.Lock();
                     if (aborted_ || !poison_.ok()) {
                       return poison_.ok() ? absl::CancelledError(what + ": aborted") : poison_;
                     }
                     return absl::OkStatus();
                   });
}

absl::Status NcclCommunicator::EndGroup(const absl::Status& ended) {
  // On the card: the watchdog's markers are its events.
  const absl::Status status = device_->OnCard([&] {
    MutexLock lock(mu_);
    const std::vector<GroupedCall> calls = std::exchange(grouped_, {});
    if (!poison_.ok()) return poison_;
    absl::Status status =
        ended.ok() ? AwaitLocked(ncclInProgress, absl::StrFormat("ncclGroupEnd on rank %d", rank_),
                                 absl::Now() + options_.timeout)
                   : ended;
    for (size_t i = 0; i < calls.size() && status.ok(); ++i) {
      status = WatchLocked(calls[i].seq, calls[i].name, calls[i].stream);
    }
    return status;
  });
  if (!status.ok()) {
    MutexLock lock(mu_);
    AbortLocked(status);  // its grouped calls never ran, or never will, or go unwatched
  }
  return status;
}

absl::Status NcclCommunicator::WatchLocked(uint64_t seq, std::string call, cudaStream_t s) {
  ASSIGN_OR_RETURN(std::unique_ptr<ProgressMarker> marker, device_->Mark(s));
  watchdog_.Track(seq, std::move(call), std::move(marker), absl::Now());
  return absl::OkStatus();
}

// A failed communicator (poisoned, an async error, collectives in flight
// that a peer may never join: ncclCommDestroy would wait for them) ends with
// ncclCommAbort. A healthy one is finalized (its work flushed; a non-blocking
// one says ncclInProgress until the group is quiescent, waited for to the
// timeout), after which ncclCommDestroy waits on no one; a finalize that
// fails or times out aborts instead. Without ncclCommFinalize it is destroyed
// at once.
void NcclCommunicator::Close() {
  MutexLock lock(mu_);
  if (PollLocked().ok() && watchdog_.pending() > 0) {
    AbortLocked(absl::CancelledError("destroyed with collectives in flight"));
  }
  if (poison_.ok() && api_->CommFinalize != nullptr) {
    const std::string what = absl::StrFormat("ncclCommFinalize on rank %d", rank_);
    const absl::Status finalized =
        AwaitLocked(api_->CommFinalize(comm_), what, absl::Now() + options_.timeout);
    if (!finalized.ok()) AbortLocked(finalized);
  }
  if (poison_.ok()) {
    (void)api_->CommDestroy(comm_);
  } else {
    AbortLocked(poison_);  // unless done already; without ncclCommAbort the comm is left
  }
  watchdog_.Clear();  // their events go while the card is current
}

absl::Status NcclCommunicator::Check(cudaStream_t stream) {
  const absl::Time deadline = absl::Now() + options_.check_timeout;
  {
    MutexLock lock(mu_);
    if (!poison_.ok()) return poison_;
    const std::string what = absl::StrFormat("ncclAllGather (sequence check) on rank %d", rank_);
    RETURN_IF_ERROR(check_->Start(*api_, comm_, history_, stream,
                                  [&](ncclResult_t result) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                                    return AwaitLocked(result, what, deadline);
                                  }));
  }
  return check_->Finish(stream, deadline, stop_);
}

// This rank's arguments: a CUDA stream, on the rank's card.
absl::Status NcclCommunicator::CheckStream(const CollectiveCall& call, Stream* stream) const {
  if (stream == nullptr) return absl::OkStatus();
  // A card stream with a null handle is CUDA's legacy default stream
  // (PyTorch's default), which NCCL takes on whichever card is current.
  if (!stream->is_card()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s on rank %d: NCCL needs a CUDA stream", call.ToString(), rank_));
  }
  const auto s = static_cast<cudaStream_t>(stream->native_handle());
  const int card = s == nullptr ? -1 : device_->StreamOrdinal(s);
  if (card >= 0 && card != device_->ordinal()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s on rank %d: the stream is on CUDA card %d, the "
                        "rank's communicator on card %d",
                        call.ToString(), rank_, card, device_->ordinal()));
  }
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Execute(const CollectiveCall& call, const void* send, void* recv,
                                       Stream* stream, const absl::Status& invalid) {
  const absl::Status bad = invalid.ok() ? CheckStream(call, stream) : invalid;
  {
    MutexLock lock(mu_);
    RETURN_IF_ERROR(PollLocked());
  }
  const uint64_t seq = history_.Record(call, bad.ok());
  // A refused stream may be another card's: the sequence check still runs
  // (so the peers learn of this rank's error at once), on the rank's own
  // card's default stream.
  const cudaStream_t s = stream != nullptr && bad.ok()
                             ? static_cast<cudaStream_t>(stream->native_handle())
                             : nullptr;
  return device_->OnCard([&] { return ExecuteOnCard(call, send, recv, s, seq, bad); });
}

absl::Status NcclCommunicator::ExecuteOnCard(const CollectiveCall& call, const void* send,
                                             void* recv, cudaStream_t s, uint64_t seq,
                                             const absl::Status& bad) {
  if (check_ != nullptr && seq % options_.check_every == 0) {
    if (absl::Status status = Check(s); !status.ok()) {
      // The ranks disagree, or one never came (NCCL would wait forever):
      // end this rank's work in flight, and the watchdog's watch with it.
      MutexLock lock(mu_);
      AbortLocked(status);
      return bad.ok() ? status : bad;
    }
  }
  MutexLock lock(mu_);
  if (!bad.ok()) {
    // Skipping the call desynchronizes this rank from its peers: fail fast.
    AbortLocked(RankFailedError(seq, rank_, bad));
    return bad;
  }
  if (!poison_.ok()) return poison_;
  absl::Status status = Issue(call, send, recv, s);
  if (status.ok() && thread_group.depth > 0) {
    if (std::find(thread_group.comms.begin(), thread_group.comms.end(), this) ==
        thread_group.comms.end()) {
      thread_group.comms.push_back(this);  // GroupEnd waits for it, then watches the call
    }
    grouped_.push_back({seq, call.ToString(), s});
    return status;
  }
  if (status.ok()) status = WatchLocked(seq, call.ToString(), s);
  if (!status.ok()) AbortLocked(status);  // the peers wait for this rank in vain
  return status;
}

}  // namespace

absl::Status GroupStart(const NcclApi& api) {
  RETURN_IF_ERROR(NcclStatus(api, api.GroupStart(), "ncclGroupStart"));
  ++thread_group.depth;
  return absl::OkStatus();
}

absl::Status GroupEnd(const NcclApi& api) {
  const ncclResult_t result = api.GroupEnd();
  ThreadGroup& group = thread_group;
  if (group.depth > 0) --group.depth;
  // ncclInProgress: launched, and non-blocking communicators still enqueueing.
  absl::Status status =
      result == ncclInProgress ? absl::OkStatus() : NcclStatus(api, result, "ncclGroupEnd");
  if (group.depth > 0) return status;  // an inner group: nothing launched yet
  const absl::Status ended = status;
  for (NcclCommunicator* comm : std::exchange(group.comms, {})) {
    status.Update(comm->EndGroup(ended));
  }
  return status;
}

std::unique_ptr<Communicator> WrapComm(const NcclApi* api, ncclComm_t comm, int rank,
                                       int world_size, std::unique_ptr<NcclRankDevice> device,
                                       NcclOptions options,
                                       std::unique_ptr<NcclSequenceCheck> check) {
  return std::make_unique<NcclCommunicator>(api, comm, rank, world_size, std::move(device),
                                            std::move(check), options);
}

}  // namespace zero::nccl
