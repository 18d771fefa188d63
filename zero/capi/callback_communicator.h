// A Communicator whose collectives are the caller's C functions
// (zero_collectives in zero_engine.h): how the engine runs over a process
// group the program already has, e.g. torch.distributed from Python.
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
// A non-zero return becomes an error (Internal, with the text the function
// left through SetCallbackError) and fails this communicator: later calls
// fail fast, and an asynchronous call's failure is AsyncError's. Peers learn
// of it only through their own process group (its timeout, or the abort
// callback). Driven by one thread at a time, as every Communicator.
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "base/mutex.h"
#include "base/serial_queue.h"
#include "zero/capi/zero_engine.h"
#include "zero/comm/communicator.h"

namespace zero {

class CallbackCommunicator : public Communicator {
 public:
  // InvalidArgument unless 0 <= rank < world_size and every collective is
  // given (abort may be null).
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(int rank, int world_size,
                                                              const zero_collectives& fns);

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  void Abort(const absl::Status& reason) override;
  // The first failure (Abort, invalid arguments, a callback's error).
  absl::Status AsyncError() const override;

 protected:
  absl::Status Execute(const CollectiveCall& call, const void* send, void* recv, Stream* stream,
                       const absl::Status& invalid) override;

 private:
  CallbackCommunicator(int rank, int world_size, const zero_collectives& fns)
      : rank_(rank), world_size_(world_size), fns_(fns) {}
  // Calls the function for `call`; its return code.
  int Call(const CollectiveCall& call, const void* send, void* recv, void* stream) const;
  // On the call thread: after `ready` (if any), the function, its failure
  // recorded.
  absl::Status RunCall(const CollectiveCall& call, const void* send, void* recv,
                       const std::shared_ptr<Event>& ready, void* stream);

  const int rank_, world_size_;
  const zero_collectives fns_;
  mutable Mutex mu_;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);  // the first failure, then every call's
  SerialQueue calls_;  // last: joined before the rest goes
};

// For a callback about to return non-zero: the text of its error (kept per
// thread until the communicator reads it).
void SetCallbackError(std::string_view message);

// NCCL's codes (ncclDataType_t, ncclRedOp_t), which the C ABI uses, and
// back (InvalidArgument naming a code that is none of ours).
int NcclDType(DType dtype);
int NcclOp(ReduceOp op);
absl::StatusOr<DType> DTypeFromNccl(int code);
absl::StatusOr<ReduceOp> ReduceOpFromNccl(int code);

}  // namespace zero
