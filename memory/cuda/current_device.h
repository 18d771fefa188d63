// Selects a card for one scope and gives the calling thread back its own
// context afterwards: every call of this library that selects a card
// (streams, events, start-up, kernel launches) leaves the caller as it found
// it, since PyTorch and other callers launch their next work on whatever is
// current. Restoring never creates a context. Plain header (no abseil), so
// .cu files include it too. Used on one thread.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

namespace zero::cuda {

class ScopedDevice {
 public:
  // Makes `ordinal` current (< 0: leaves the current card alone).
  explicit ScopedDevice(int ordinal);
  ~ScopedDevice();
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

  // cudaSuccess, or why the card could not be made current.
  cudaError_t status() const { return status_; }

  // The card `stream` belongs to; -1 for the legacy default stream (null),
  // which belongs to whatever card is current.
  static int OrdinalOf(cudaStream_t stream);

 private:
  int previous_ = -1;              // the caller's card; -1 when unreadable
  CUcontext previous_context_ = nullptr;  // the caller's context, if any
  bool changed_ = false;
  cudaError_t status_ = cudaSuccess;
};

}  // namespace zero::cuda
