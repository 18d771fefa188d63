// Runs the engine's element-wise operations (elementwise_op.h) on the device
// a stream belongs to, ordered with the stream's other work (on_device.h):
//  - host devices: work enqueued on the host stream (Stream::Enqueue), run
//    by cpu/run_elementwise.h at the active SIMD level, large spans split
//    over the CPU pool (parallel.h); maps give the same bits for any split,
//    the sum of squares adds in element order (bit-identical to
//    zero/precision.h's loops);
//  - cards: grid-stride kernels with vectorized loads on the stream's
//    cudaStream_t (cuda/elementwise_kernels.h: the card's summation order,
//    which differs from the host's);
//  - meta devices: nothing (no bytes); arguments are still checked.
//
// Arguments go as in RMM and NCCL: (destination, source, count, dtype...,
// stream). `count` is in elements; `dtype` is the model dtype (fp32, bf16,
// fp16) of the non-fp32 side. Scalars that steer the work (the scale factor,
// the sum, the flag) are pointers into the stream's device memory, read or
// written when the work runs, so they never need to reach the host. Every
// pointer must stay valid until the stream has run the work.
//
// Executors are immutable singletons; every method is thread-safe. Errors
// (bad arguments, a failed launch) come back as InvalidArgument or the
// launch's error; nothing is enqueued then.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "base/dtype.h"
#include "compute/elementwise_op.h"
#include "memory/backend.h"
#include "memory/stream.h"

namespace zero {

class ElementwiseExecutor {
 public:
  // The executor for a DeviceSystem's kind (DeviceSystem::kind()).
  static const ElementwiseExecutor& For(DeviceKind kind);

  // dst[i] = float(src[i]).
  absl::Status Widen(float* dst, const void* src, size_t count, DType src_dtype,
                     Stream* stream) const;
  // dst[i] = dst_dtype(src[i]), rounded to nearest even.
  absl::Status Narrow(void* dst, const float* src, size_t count, DType dst_dtype,
                      Stream* stream) const;
  // dst[i] = dtype(float(dst[i]) + src[i]): one rounding per element.
  absl::Status AccumulateNarrow(void* dst, const float* src, size_t count, DType dst_dtype,
                                Stream* stream) const;
  // dst[i] = dtype(value).
  absl::Status Fill(void* dst, float value, size_t count, DType dtype, Stream* stream) const;
  // data[i] = dtype(float(data[i]) * *factor); *factor is read when the work
  // runs, so an earlier operation on the stream may compute it.
  absl::Status Scale(void* data, const float* factor, size_t count, DType dtype,
                     Stream* stream) const;
  // *sum += the sum of squares of src[0..count) in fp64 (accumulates, so a
  // zeroed scalar can gather many spans; each span's total is added once).
  absl::Status SumOfSquares(double* sum, const void* src, size_t count, DType dtype,
                            Stream* stream) const;
  // *flag = 1 when any of src[0..count) is inf or NaN; left alone otherwise,
  // so one zeroed flag can gather many spans.
  absl::Status FlagNonFinite(int32_t* flag, const void* src, size_t count, DType dtype,
                             Stream* stream) const;

  // *scalars = StepScalarsOf(partials, ranks, mean_scale, max_norm)
  // (elementwise_rules.h): the norm and the clipped grad scale, computed
  // from `ranks` fp64 partial sums of squares when the work runs.
  absl::Status ComputeStepScalars(StepScalars* scalars, const double* partials, size_t ranks,
                                  float mean_scale, double max_norm, Stream* stream) const;

  // What each method above calls: checks `op` and `stream`, then enqueues.
  absl::Status Run(const ElementwiseOp& op, Stream* stream) const;

 private:
  explicit ElementwiseExecutor(DeviceKind kind) : kind_(kind) {}
  const DeviceKind kind_;
};

// InvalidArgument naming the operation and the argument when `op` is not
// one the executors can run: invalid kind or dtype, a null or misaligned
// pointer (elements aligned to their size; scalars to theirs).
absl::Status ValidateElementwiseOp(const ElementwiseOp& op);

}  // namespace zero
