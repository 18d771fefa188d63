// The NCCL backend's optional hang and mismatch detector
// (NcclOptions::check_every = K > 0).
//
// Before issuing its call number n with n % K == 0, each rank all-gathers its
// last K calls (seq, fingerprint, descriptors; see call_history.h) on the same
// communicator and stream, waits for it on the host, and compares
// (CompareHistories). Every rank runs the check at the same place in its own
// sequence, so the check's all-gathers pair up as long as the ranks issued
// equally many calls; differing calls within the window are then named
// exactly, before the differing call n reaches NCCL when K = 1. A rank that
// never reaches the check leaves the others waiting: after the timeout they
// get DeadlineExceeded (and the communicator aborts). With a non-blocking
// communicator the all-gather may answer ncclInProgress: nothing more goes on
// the stream until the communicator says it is done (NCCL's rule). Cost per
// check: one all-gather of (2 + 2K) * 8 bytes per rank and a stream
// synchronization. Not thread-safe: owned by one communicator.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "zero/comm/internal/call_history.h"
#include "zero/comm/nccl_api.h"

namespace zero::nccl {

class NcclSequenceCheck {
 public:
  // Allocates its buffers on `device` (the communicator's card).
  static absl::StatusOr<std::unique_ptr<NcclSequenceCheck>> Create(int device, int rank,
                                                                   int world_size, int window);
  virtual ~NcclSequenceCheck() = default;
  NcclSequenceCheck(const NcclSequenceCheck&) = delete;
  NcclSequenceCheck& operator=(const NcclSequenceCheck&) = delete;

  // Words per rank for a window of `window` calls (Serialize's size).
  static size_t Words(int window) { return 2 + 2 * static_cast<size_t>(window); }

  // What the all-gather's result means: NCCL's error, or OK once a
  // non-blocking communicator that answered ncclInProgress is done (the
  // communicator waits as for its own calls, to the check's deadline).
  using Settle = absl::FunctionRef<absl::Status(ncclResult_t)>;
  // Enqueues the exchange of `history` on `stream` (the device is current):
  // the all-gather, settled before the copy back is enqueued.
  absl::Status Start(const NcclApi& api, ncclComm_t comm, const CallHistory& history,
                     cudaStream_t stream, Settle settle);
  // Waits for it until `deadline`, or until `stop` turns true (then
  // Cancelled), and compares the ranks' histories.
  absl::Status Finish(cudaStream_t stream, absl::Time deadline, const std::atomic<bool>& stop);

 protected:
  // Over `gathered` (where NCCL gathers: on the card) and `host` (where the
  // ranks' histories are read: pinned, so the copy back is truly async), each
  // Words(window) * world_size long and owned by the subclass.
  NcclSequenceCheck(int rank, int world_size, int window, uint64_t* gathered, uint64_t* host);
  uint64_t* gathered() const { return gathered_; }  // for the subclass to free
  uint64_t* host() const { return host_; }

  // The stream's side, a card's in Create's (tests run it over host memory):
  // cudaMemcpyAsync on `stream`, and cudaStreamQuery (true once the stream's
  // work is done; never blocks).
  virtual absl::Status CopyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                                 cudaStream_t stream) = 0;
  virtual absl::StatusOr<bool> StreamDone(cudaStream_t stream) = 0;

 private:
  const int rank_;
  const int world_size_;
  const int window_;
  const size_t words_;  // per rank
  uint64_t* const gathered_;
  uint64_t* const host_;
  uint64_t check_seq_ = 0;
};

}  // namespace zero::nccl
