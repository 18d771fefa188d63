#include "zero/comm/callback_communicator.h"

#include <future>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"

namespace zero {

absl::StatusOr<std::unique_ptr<Communicator>> CallbackCommunicator::Create(
    int rank, int world_size, CallbackCollectives fns) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rank %d of world size %d", rank, world_size));
  }
  if (!fns.all_gather || !fns.reduce_scatter || !fns.all_reduce || !fns.broadcast ||
      !fns.barrier) {
    return absl::InvalidArgumentError(
        "every collective (all_gather, reduce_scatter, all_reduce, broadcast, barrier) is required");
  }
  return std::unique_ptr<Communicator>(
      new CallbackCommunicator(rank, world_size, std::move(fns)));
}

void CallbackCommunicator::Abort(const absl::Status& reason) {
  const absl::Status status = reason.ok() ? absl::CancelledError("aborted") : reason;
  {
    MutexLock lock(mu_);
    if (!failed_.ok()) return;  // told once
    failed_ = status;
  }
  const absl::string_view message = status.message();
  if (fns_.abort) fns_.abort(std::string_view(message.data(), message.size()));
}

absl::Status CallbackCommunicator::AsyncError() const {
  MutexLock lock(mu_);
  return failed_;
}

absl::Status CallbackCommunicator::Call(const CollectiveCall& call, const void* send, void* recv,
                                        void* stream) {
  switch (call.kind) {
    case CollectiveKind::kAllGather:
      return fns_.all_gather(send, recv, call.count, call.dtype, stream);
    case CollectiveKind::kReduceScatter:
      return fns_.reduce_scatter(send, recv, call.count, call.dtype, call.op, stream);
    case CollectiveKind::kAllReduce:
      return fns_.all_reduce(send, recv, call.count, call.dtype, call.op, stream);
    case CollectiveKind::kBroadcast:
      return fns_.broadcast(send, recv, call.count, call.dtype, call.root, stream);
    case CollectiveKind::kBarrier:
      return fns_.barrier(stream);
    case CollectiveKind::kAllToAll:
      if (!fns_.all_to_all) {
        return absl::UnimplementedError(
            "this group's callbacks have no all_to_all (quantized gradients need one)");
      }
      return fns_.all_to_all(send, recv, call.count, call.dtype, stream);
  }
  return absl::InternalError(absl::StrFormat("unknown collective %s", call.ToString()));
}

absl::Status CallbackCommunicator::Execute(const CollectiveCall& call, const void* send,
                                           void* recv, Stream* stream,
                                           const absl::Status& invalid) {
  {
    MutexLock lock(mu_);
    if (!failed_.ok()) return failed_;
  }
  if (!invalid.ok()) {
    Abort(invalid);
    return invalid;
  }
  // Host streams are executors the call thread can wait on by an event; a
  // card's stream is waited for here, as the function runs torch's or
  // NCCL's work that must not run inside a CUDA host callback.
  // A call that cannot be ordered never reaches the peers, who would pair
  // this rank's next call with it: every failure from here fails the group.
  const bool async = stream != nullptr && !stream->is_card();
  std::shared_ptr<Event> ready;
  if (async) {
    absl::StatusOr<std::shared_ptr<Event>> recorded = stream->Record();
    if (!recorded.ok()) {
      Abort(recorded.status());
      return recorded.status();
    }
    ready = *std::move(recorded);
  } else if (stream != nullptr) {
    if (absl::Status s = stream->Synchronize(); !s.ok()) {
      Abort(s);
      return s;
    }
  }
  auto done = std::make_shared<std::promise<absl::Status>>();
  std::shared_future<absl::Status> result = done->get_future().share();
  calls_.Post([this, call, send, recv, ready, done,
               native = stream != nullptr ? stream->native_handle() : nullptr] {
    done->set_value(RunCall(call, send, recv, ready, native));
  });
  if (!async) return result.get();
  absl::Status enqueued = stream->Enqueue([result] { result.wait(); });
  if (!enqueued.ok()) {
    // The call is posted: after the abort it either does not start or
    // ends; it must not write `recv` after the caller was told it failed.
    Abort(enqueued);
    result.wait();
  }
  return enqueued;
}

absl::Status CallbackCommunicator::RunCall(const CollectiveCall& call, const void* send,
                                           void* recv, const std::shared_ptr<Event>& ready,
                                           void* stream) {
  {
    MutexLock lock(mu_);
    if (!failed_.ok()) return failed_;  // peers are told by the abort, not by more calls
  }
  if (ready != nullptr) {
    if (absl::Status s = ready->Synchronize(); !s.ok()) {
      Abort(s);
      return s;
    }
  }
  const absl::Status result = Call(call, send, recv, stream);
  if (result.ok()) return result;
  const absl::Status failed(result.code(),
                            absl::StrFormat("rank %d: the %s callback failed: %s", rank_,
                                            call.ToString(), result.message()));
  Abort(failed);
  return failed;
}

}  // namespace zero
