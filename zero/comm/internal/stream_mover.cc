#include "zero/comm/internal/stream_mover.h"

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "memory/tag.h"
#include "zero/comm/internal/host_reduce.h"

namespace zero {

StreamMover::StreamMover(Stream* stream, DeviceSystem* devices)
    : stream_(stream),
      devices_(devices),
      elementwise_(ElementwiseExecutor::For(devices->kind())) {}

StreamMover::~StreamMover() {
  // Copies into the host fallback's buffers may still be queued (a later
  // enqueue failed before Finish): they must land before the buffers go.
  if (!host_.empty()) (void)stream_->Synchronize();
  if (scratch_ != nullptr) (void)scratch_pool_->Deallocate(scratch_, scratch_bytes_, stream_);
}

absl::Status StreamMover::Copy(void* dst, const void* src, size_t bytes) {
  if (dst == src || bytes == 0) return absl::OkStatus();
  return stream_->Copy(dst, src, bytes);
}

// One fp32 buffer per call, grown as needed (the call's chunks are of one
// size, so it is allocated once).
absl::StatusOr<float*> StreamMover::Scratch(const void* near, size_t count) {
  const size_t bytes = count * sizeof(float);
  if (bytes <= scratch_bytes_) return static_cast<float*>(scratch_);
  const std::optional<int> device = devices_->device_of(near);
  if (!device.has_value()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "local collective on a device stream: %p is not memory of any device", near));
  }
  if (scratch_ != nullptr) RETURN_IF_ERROR(scratch_pool_->Deallocate(scratch_, scratch_bytes_, stream_));
  scratch_ = nullptr;
  scratch_pool_ = &devices_->pool(*device);
  ASSIGN_OR_RETURN(scratch_, scratch_pool_->Allocate(bytes, Tag::kCommunication, stream_));
  scratch_bytes_ = bytes;
  return static_cast<float*>(scratch_);
}

absl::Status StreamMover::Reduce(DType dtype, ReduceOp op, absl::Span<const void* const> sources,
                                 void* dst, size_t count) {
  if (count == 0) return absl::OkStatus();
  if (op != ReduceOp::kSum) return ReduceOnHost(dtype, op, sources, dst, count);
  // acc = float(s0); acc = float(acc + float(s_p)) for p = 1..; dst = dtype(acc):
  // the order and roundings of HostReduce. The accumulator is scratch, so dst
  // may be any source.
  // bf16/fp16 sources are widened one at a time into the scratch's second half.
  const bool fp32 = dtype == DType::kF32;
  ASSIGN_OR_RETURN(float* acc, Scratch(dst, fp32 ? count : 2 * count));
  float* widened = fp32 ? nullptr : acc + count;
  RETURN_IF_ERROR(elementwise_.Widen(acc, sources[0], count, dtype, stream_));
  for (size_t p = 1; p < sources.size(); ++p) {
    const float* term = static_cast<const float*>(sources[p]);
    if (widened != nullptr) {
      RETURN_IF_ERROR(elementwise_.Widen(widened, sources[p], count, dtype, stream_));
      term = widened;
    }
    RETURN_IF_ERROR(elementwise_.AccumulateNarrow(acc, term, count, DType::kF32, stream_));
  }
  return elementwise_.Narrow(dst, acc, count, dtype, stream_);
}

// Bookkeeping reductions: each source copied down, reduced, copied back.
absl::Status StreamMover::ReduceOnHost(DType dtype, ReduceOp op,
                                       absl::Span<const void* const> sources, void* dst,
                                       size_t count) {
  const size_t bytes = count * SizeOf(dtype);
  std::vector<const void*> local;
  for (const void* source : sources) {
    std::vector<char>& copy = host_.emplace_back(bytes);
    RETURN_IF_ERROR(stream_->Copy(copy.data(), source, bytes));
    local.push_back(copy.data());
  }
  RETURN_IF_ERROR(stream_->Synchronize());
  std::vector<char>& result = host_.emplace_back(bytes);
  HostReduce(dtype, op, local, result.data(), count);
  return stream_->Copy(dst, result.data(), bytes);
}

absl::Status StreamMover::Finish() {
  absl::Status done = stream_->Synchronize();
  host_.clear();
  return done;
}

}  // namespace zero
