// A Communicator whose collectives are the caller's functions
// (CallbackCollectives): how the engine runs over a process group the
// program already has, e.g. torch.distributed from Python through the C ABI
// (zero/capi/ adapts its zero_collectives to this table).
//
// The functions run on the communicator's own thread, one at a time, in
// the order the calls were made (a process group needs one order on every
// rank); each must return with recv holding the result. A call on a host
// device's stream returns at once: its function runs after the stream's
// earlier work, and the stream's later work waits for it, so the caller
// goes on meanwhile (backward, with the gradients' reduce-scatters; as the
// local backend and NCCL do). A call on a card's stream waits for the
// stream, then for the function (the function orders its own stream); a
// call without a stream waits for the function.
// A function's error (its code, its text after "rank R: the CALL callback
// failed: ") fails this communicator: later calls fail fast, and an
// asynchronous call's failure is AsyncError's. Peers learn of it only
// through their own process group (its timeout, or the abort function).
// Driven by one thread at a time, as every Communicator.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "base/mutex.h"
#include "base/serial_queue.h"
#include "zero/comm/communicator.h"

namespace zero {

// One rank's collectives in NCCL's argument order. Counts are per rank, as
// in NCCL; in place is NCCL's (all-gather send == recv + rank * count,
// reduce-scatter recv == send + rank * count). `stream` is the native
// handle of the caller's stream (a cudaStream_t on cards, null on host
// devices or without one), already waited for. Called on the
// communicator's thread; the communicator owns them.
struct CallbackCollectives {
  absl::AnyInvocable<absl::Status(const void* send, void* recv, size_t count, DType dtype,
                                  void* stream)>
      all_gather;
  absl::AnyInvocable<absl::Status(const void* send, void* recv, size_t count, DType dtype,
                                  ReduceOp op, void* stream)>
      reduce_scatter;
  absl::AnyInvocable<absl::Status(const void* send, void* recv, size_t count, DType dtype,
                                  ReduceOp op, void* stream)>
      all_reduce;
  absl::AnyInvocable<absl::Status(const void* send, void* recv, size_t count, DType dtype,
                                  int root, void* stream)>
      broadcast;
  absl::AnyInvocable<absl::Status(void* stream)> barrier;
  // Optional: without it AllToAll is Unimplemented.
  absl::AnyInvocable<absl::Status(const void* send, void* recv, size_t count, DType dtype,
                                  void* stream)>
      all_to_all;
  // Optional: called once, on the thread that found the failure, when this
  // rank fails, so the caller can bring its peers down instead of letting
  // them wait.
  absl::AnyInvocable<void(std::string_view reason)> abort;
};

class CallbackCommunicator : public Communicator {
 public:
  // InvalidArgument unless 0 <= rank < world_size and every collective is
  // given (abort may be empty).
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(int rank, int world_size,
                                                              CallbackCollectives fns);

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  void Abort(const absl::Status& reason) override;
  // The first failure (Abort, invalid arguments, a function's error).
  absl::Status AsyncError() const override;

 protected:
  absl::Status Execute(const CollectiveCall& call, const void* send, void* recv, Stream* stream,
                       const absl::Status& invalid) override;

 private:
  CallbackCommunicator(int rank, int world_size, CallbackCollectives fns)
      : rank_(rank), world_size_(world_size), fns_(std::move(fns)) {}
  // Calls the function for `call` (on the call thread).
  absl::Status Call(const CollectiveCall& call, const void* send, void* recv, void* stream);
  // On the call thread: after `ready` (if any), the function, its failure
  // recorded.
  absl::Status RunCall(const CollectiveCall& call, const void* send, void* recv,
                       const std::shared_ptr<Event>& ready, void* stream);

  const int rank_, world_size_;
  // The collectives run only on calls_' thread; abort runs once (failed_).
  CallbackCollectives fns_;
  mutable Mutex mu_;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);  // the first failure, then every call's
  SerialQueue calls_{{}, "zero-comm"};  // last: joined before the rest goes
};

}  // namespace zero
