// A Communicator whose collectives are the caller's C functions
// (zero_collectives in zero_engine.h): how the engine runs over a process
// group the program already has, e.g. torch.distributed from Python.
//
// Stream semantics: a call first waits for the work on `stream`, then calls
// the function on the calling thread, which must return with recv holding
// the result (a synchronous collective). A non-zero return becomes an error
// (Internal, with the text the function left through SetCallbackError) and
// fails this communicator: later calls fail fast. Peers learn of it only
// through their own process group (its timeout, or the abort callback).
// Driven by one thread at a time, as every Communicator.
#pragma once

#include <mutex>
#include <string_view>

#include "absl/status/status.h"
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

  const int rank_, world_size_;
  const zero_collectives fns_;
  mutable std::mutex mu_;
  absl::Status failed_;  // guarded by mu_: the first failure, then every call's
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
