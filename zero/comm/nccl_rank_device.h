// The CUDA side of one NCCL rank (its card, its progress markers, Barrier's
// scratch float), behind an interface so that the communicator's logic
// (watchdog, card selection, failure paths) runs in tests with a fake one and
// no card. Used under the owning communicator's lock, except OnCard, which
// any thread may call (the rank's, the watchdog's, AsyncError's callers);
// markers may be polled from its watchdog thread.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zero::nccl {

// The end of the work enqueued on a stream when it was made (a CUDA event
// of the rank's card: query and destroy it with that card current).
class ProgressMarker {
 public:
  virtual ~ProgressMarker() = default;
  // True once that work finished; never blocks.
  virtual absl::StatusOr<bool> Done() = 0;
};

class NcclRankDevice {
 public:
  virtual ~NcclRankDevice() = default;
  // The rank's CUDA ordinal.
  virtual int ordinal() const = 0;
  // The card `stream` belongs to (cudaStreamGetDevice); -1 when unknown
  // (the legacy default stream, or a runtime without the call).
  virtual int StreamOrdinal(cudaStream_t stream) const = 0;
  // Runs `body` with the rank's card current and gives the caller back its
  // own card afterwards.
  virtual absl::Status OnCard(absl::FunctionRef<absl::Status()> body) = 0;
  // Marks `stream`'s work so far; call with the card current.
  virtual absl::StatusOr<std::unique_ptr<ProgressMarker>> Mark(cudaStream_t stream) = 0;
  // One float on the card that the barrier reduces.
  virtual float* scratch() = 0;
};

// The real one: allocates the scratch float on card `ordinal`.
absl::StatusOr<std::unique_ptr<NcclRankDevice>> MakeCudaRankDevice(int ordinal);

// Runs `body` with card `ordinal` current, restoring the caller's card.
absl::Status RunOnCard(int ordinal, absl::FunctionRef<absl::Status()> body);

}  // namespace zero::nccl
