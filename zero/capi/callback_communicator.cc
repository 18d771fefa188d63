#include "zero/capi/callback_communicator.h"

#include <future>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"

namespace zero {
namespace {

thread_local std::string callback_error;

}  // namespace

void SetCallbackError(std::string_view message) { callback_error.assign(message); }

int NcclDType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return ZERO_F32;
    case DType::kBF16:
      return ZERO_BF16;
    case DType::kF16:
      return ZERO_F16;
  }
  return -1;
}

int NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ZERO_SUM;
    case ReduceOp::kMax:
      return ZERO_MAX;
    case ReduceOp::kAvg:
      return ZERO_AVG;
  }
  return -1;
}

absl::StatusOr<DType> DTypeFromNccl(int code) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16}) {
    if (NcclDType(d) == code) return d;
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("dtype code %d is not f32 (7), bf16 (9) or f16 (6)", code));
}

absl::StatusOr<ReduceOp> ReduceOpFromNccl(int code) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
    if (NcclOp(op) == code) return op;
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("reduction code %d is not sum (0), max (2) or avg (4)", code));
}

absl::StatusOr<std::unique_ptr<Communicator>> CallbackCommunicator::Create(
    int rank, int world_size, const zero_collectives& fns) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rank %d of world size %d", rank, world_size));
  }
  if (!fns.all_gather || !fns.reduce_scatter || !fns.all_reduce || !fns.broadcast ||
      !fns.barrier) {
    return absl::InvalidArgumentError(
        "every collective (all_gather, reduce_scatter, all_reduce, broadcast, barrier) is required");
  }
  return std::unique_ptr<Communicator>(new CallbackCommunicator(rank, world_size, fns));
}

void CallbackCommunicator::Abort(const absl::Status& reason) {
  const absl::Status status = reason.ok() ? absl::CancelledError("aborted") : reason;
  {
    MutexLock lock(mu_);
    if (!failed_.ok()) return;  // told once
    failed_ = status;
  }
  if (fns_.abort) fns_.abort(std::string(status.message()).c_str(), fns_.user);
}

absl::Status CallbackCommunicator::AsyncError() const {
  MutexLock lock(mu_);
  return failed_;
}

int CallbackCommunicator::Call(const CollectiveCall& call, const void* send, void* recv,
                               void* stream) const {
  const int dtype = NcclDType(call.dtype);
  switch (call.kind) {
    case CollectiveKind::kAllGather:
      return fns_.all_gather(send, recv, call.count, dtype, fns_.user, stream);
    case CollectiveKind::kReduceScatter:
      return fns_.reduce_scatter(send, recv, call.count, dtype, NcclOp(call.op), fns_.user,
                                 stream);
    case CollectiveKind::kAllReduce:
      return fns_.all_reduce(send, recv, call.count, dtype, NcclOp(call.op), fns_.user, stream);
    case CollectiveKind::kBroadcast:
      return fns_.broadcast(send, recv, call.count, dtype, call.root, fns_.user, stream);
    case CollectiveKind::kBarrier:
      return fns_.barrier(fns_.user, stream);
  }
  return -1;
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
  callback_error.clear();
  const int code = Call(call, send, recv, stream);
  if (code == 0) return absl::OkStatus();
  const absl::Status failed = absl::InternalError(absl::StrFormat(
      "rank %d: the %s callback failed (code %d)%s%s", rank_, call.ToString(), code,
      callback_error.empty() ? "" : ": ", callback_error));
  Abort(failed);
  return failed;
}

}  // namespace zero
