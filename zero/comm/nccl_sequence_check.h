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
// get DeadlineExceeded (and the communicator aborts). Cost per check: one
// all-gather of (2 + 2K) * 8 bytes per rank and a stream synchronization.
// Not thread-safe: owned by one communicator.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <memory>

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
  ~NcclSequenceCheck();
  NcclSequenceCheck(const NcclSequenceCheck&) = delete;
  NcclSequenceCheck& operator=(const NcclSequenceCheck&) = delete;

  // Enqueues the exchange of `history` on `stream` (the device is current).
  absl::Status Start(const NcclApi& api, ncclComm_t comm, const CallHistory& history,
                     cudaStream_t stream);
  // Waits for it until `deadline`, or until `stop` turns true (then
  // Cancelled), and compares the ranks' histories.
  absl::Status Finish(cudaStream_t stream, absl::Time deadline, const std::atomic<bool>& stop);

 private:
  NcclSequenceCheck(int device, int rank, int world_size, int window);

  const int device_;
  const int rank_;
  const int world_size_;
  const int window_;
  const size_t words_;  // per rank
  uint64_t* device_buffer_ = nullptr;
  uint64_t* host_buffer_ = nullptr;  // pinned, so the copy back is truly async
  uint64_t check_seq_ = 0;
};

}  // namespace zero::nccl
