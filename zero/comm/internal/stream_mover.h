// How the local backend moves one rank's share of a collective when its
// buffers may be on a card: as work on the rank's stream (Stream::Copy, and
// sums by the element-wise executor in rank order, in fp32, rounded once),
// where the host path (local_communicator.cc) uses memcpy and HostReduce on
// the calling thread. Finish waits for the stream, so the rank's peers may
// reuse their buffers once it leaves the rendezvous.
//
// Sums run on the device and equal HostReduce bit for bit (element-wise fp32
// additions in the same order, rounded once; no fused operations). kMax and
// kAvg (the engine's bookkeeping, a few bytes) are copied to host memory,
// reduced there and copied back.
// Scratch (the fp32 accumulator) comes from the pool of the device that holds
// the destination, on the rank's stream. One per call; not thread-safe.
#pragma once

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "base/dtype.h"
#include "compute/elementwise_executor.h"
#include "memory/device_system.h"
#include "memory/stream.h"
#include "zero/comm/collective.h"

namespace zero {

class StreamMover {
 public:
  // `stream`: the rank's (never null); `devices`: where its buffers live.
  StreamMover(Stream* stream, DeviceSystem* devices);
  ~StreamMover();  // gives back the scratch (stream-ordered)

  absl::Status Copy(void* dst, const void* src, size_t bytes);
  // dst[i] = op(sources[0][i], sources[1][i], ...), as HostReduce; dst may
  // be one of the sources (in place).
  absl::Status Reduce(DType dtype, ReduceOp op, absl::Span<const void* const> sources, void* dst,
                      size_t count);
  // Waits until the stream has run everything above.
  absl::Status Finish();

 private:
  absl::StatusOr<float*> Scratch(const void* near, size_t count);
  absl::Status ReduceOnHost(DType dtype, ReduceOp op, absl::Span<const void* const> sources,
                            void* dst, size_t count);

  Stream* const stream_;
  DeviceSystem* const devices_;
  const ElementwiseExecutor& elementwise_;
  MemoryResource* scratch_pool_ = nullptr;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  std::vector<std::vector<char>> host_;  // the host fallback's copies, until Finish
};

}  // namespace zero
