#include "compute/elementwise_executor.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_format.h"
#include "compute/cpu/run_elementwise.h"
#include "compute/cuda/launch.h"
#include "compute/on_device.h"

namespace zero {
namespace {

// A pointer an operation uses, and the alignment its elements need.
struct Operand {
  const char* name;
  const void* ptr;
  size_t align;
};

// The pointers `op` reads or writes (valid kind and dtype), null-terminated.
void OperandsOf(const ElementwiseOp& op, Operand (&out)[3]) {
  const size_t element = SizeOf(op.dtype);
  switch (op.kind) {
    case ElementwiseKind::kWiden:
      out[0] = {"dst", op.dst, 4};
      out[1] = {"src", op.src, element};
      break;
    case ElementwiseKind::kNarrow:
    case ElementwiseKind::kAccumulate:
      out[0] = {"dst", op.dst, element};
      out[1] = {"src", op.src, 4};
      break;
    case ElementwiseKind::kFill:
      out[0] = {"dst", op.dst, element};
      break;
    case ElementwiseKind::kScale:
      out[0] = {"data", op.dst, element};
      out[1] = {"factor", op.factor, 4};
      break;
    case ElementwiseKind::kSumOfSquares:
      out[0] = {"sum", op.dst, 8};
      out[1] = {"src", op.src, element};
      break;
    case ElementwiseKind::kFlagNonFinite:
      out[0] = {"flag", op.dst, 4};
      out[1] = {"src", op.src, element};
      break;
    case ElementwiseKind::kStepScalars:
      out[0] = {"scalars", op.dst, alignof(StepScalars)};
      out[1] = {"partials", op.src, alignof(double)};
      break;
  }
}

ElementwiseOp OpOf(ElementwiseKind kind, DType dtype, size_t count, void* dst, const void* src) {
  return {.kind = kind, .dtype = dtype, .count = count, .dst = dst, .src = src,
          .factor = nullptr, .value = 0, .limit = 0};
}

}  // namespace

absl::Status ValidateElementwiseOp(const ElementwiseOp& op) {
  if (static_cast<int>(op.kind) >= kNumElementwiseKinds) {
    return absl::InvalidArgumentError(
        absl::StrFormat("element-wise operation of invalid kind %d", static_cast<int>(op.kind)));
  }
  if (!IsValid(op.dtype)) {
    return absl::InvalidArgumentError(absl::StrFormat("%s with invalid dtype %d", Name(op.kind),
                                                      static_cast<int>(op.dtype)));
  }
  if (op.count == 0) return absl::OkStatus();
  Operand operands[3] = {};
  OperandsOf(op, operands);
  for (const Operand& o : operands) {
    if (o.name == nullptr) break;
    std::string problem;
    if (o.ptr == nullptr) {
      problem = "is null";
    } else if (reinterpret_cast<uintptr_t>(o.ptr) % o.align != 0) {
      problem = absl::StrFormat("is not %d-byte aligned", o.align);
    }
    if (!problem.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("%s of %d %s elements: %s (%p) %s",
                                                        Name(op.kind), op.count,
                                                        std::string(Name(op.dtype)), o.name,
                                                        o.ptr, problem));
    }
  }
  return absl::OkStatus();
}

const ElementwiseExecutor& ElementwiseExecutor::For(DeviceKind kind) {
  static const ElementwiseExecutor host(DeviceKind::kHost), cuda(DeviceKind::kCuda),
      meta(DeviceKind::kMeta);
  switch (kind) {
    case DeviceKind::kCuda: return cuda;
    case DeviceKind::kMeta: return meta;
    default: return host;
  }
}

absl::Status ElementwiseExecutor::Run(const ElementwiseOp& op, Stream* stream) const {
  if (stream == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: stream is null", Name(op.kind)));
  }
  if (absl::Status s = ValidateElementwiseOp(op); !s.ok()) return s;
  if (op.count == 0) return absl::OkStatus();
  return RunOnDevice(
      kind_, *stream, [op] { cpu::RunElementwise(op); },
      [&op](int device, void* native) { return cuda::RunElementwise(op, device, native); });
}

absl::Status ElementwiseExecutor::Widen(float* dst, const void* src, size_t count,
                                        DType src_dtype, Stream* stream) const {
  return Run(OpOf(ElementwiseKind::kWiden, src_dtype, count, dst, src), stream);
}

absl::Status ElementwiseExecutor::Narrow(void* dst, const float* src, size_t count,
                                         DType dst_dtype, Stream* stream) const {
  return Run(OpOf(ElementwiseKind::kNarrow, dst_dtype, count, dst, src), stream);
}

absl::Status ElementwiseExecutor::AccumulateNarrow(void* dst, const float* src, size_t count,
                                                   DType dst_dtype, Stream* stream) const {
  return Run(OpOf(ElementwiseKind::kAccumulate, dst_dtype, count, dst, src), stream);
}

absl::Status ElementwiseExecutor::Fill(void* dst, float value, size_t count, DType dtype,
                                       Stream* stream) const {
  ElementwiseOp op = OpOf(ElementwiseKind::kFill, dtype, count, dst, nullptr);
  op.value = value;
  return Run(op, stream);
}

absl::Status ElementwiseExecutor::Scale(void* data, const float* factor, size_t count,
                                        DType dtype, Stream* stream) const {
  ElementwiseOp op = OpOf(ElementwiseKind::kScale, dtype, count, data, nullptr);
  op.factor = factor;
  return Run(op, stream);
}

absl::Status ElementwiseExecutor::SumOfSquares(double* sum, const void* src, size_t count,
                                               DType dtype, Stream* stream) const {
  return Run(OpOf(ElementwiseKind::kSumOfSquares, dtype, count, sum, src), stream);
}

absl::Status ElementwiseExecutor::FlagNonFinite(int32_t* flag, const void* src, size_t count,
                                                DType dtype, Stream* stream) const {
  return Run(OpOf(ElementwiseKind::kFlagNonFinite, dtype, count, flag, src), stream);
}

absl::Status ElementwiseExecutor::ComputeStepScalars(StepScalars* scalars, const double* partials,
                                                     size_t ranks, float mean_scale,
                                                     double max_norm, Stream* stream) const {
  ElementwiseOp op = OpOf(ElementwiseKind::kStepScalars, DType::kF32, ranks, scalars, partials);
  op.value = mean_scale;
  op.limit = max_norm;
  return Run(op, stream);
}

}  // namespace zero
