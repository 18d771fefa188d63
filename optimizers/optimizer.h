// The interface every element-wise optimizer implements, so that an engine
// can wrap any of them without knowing which. An update touches each element
// on its own, so stepping a slice gives bit-identical results to stepping the
// whole array: shards may be updated anywhere, in any split.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "memory/backend.h"
#include "memory/stream.h"

namespace zero {

// One update of a contiguous slice. Nothing is owned: every pointer is the
// caller's and must stay valid for the call (for StepCuda, until the stream
// has run the work). Buffers must not overlap one another.
struct StepArgs {
  std::span<float> params;      // fp32 master weights of the slice, updated in place
  const void* grads = nullptr;  // params.size() elements of grad_dtype
  DType grad_dtype = DType::kF32;
  // state_buffers() fp32 buffers, each params.size() long, zero-filled before
  // step 1 (as torch creates them) and carried from step to step.
  std::span<const std::span<float>> state;
  int64_t step = 1;            // 1-based count of this step (bias correction; SGD's first step)
  float grad_scale = 1.0f;     // gradients are multiplied by this first (1/loss scale, clip coef)
  // Optional: the scale is then grad_scale * *grad_scale_at, read when the
  // update runs (device memory for StepCuda), so an earlier kernel on the
  // stream may compute it and the host never sees it (StepScalars).
  const float* grad_scale_at = nullptr;
  void* param_copy = nullptr;  // optional: updated params converted to copy_dtype, same pass
  DType copy_dtype = DType::kBF16;
  // Where params[0] sits in the caller's numbering of all its elements (an
  // engine: the flat buffer of its layout). The rules ignore it; an
  // optimizer that treats elements by position (parameter groups) needs
  // it, since the buffers may be staging copies anywhere in memory.
  size_t first_element = 0;
};

// A StepArgs that owns the array of its state spans (StepArgs::state points
// at the caller's): what an update bound now and run later keeps. Move-only.
class KeptStepArgs {
 public:
  explicit KeptStepArgs(const StepArgs& args)
      : args_(args), state_(args.state.begin(), args.state.end()) {
    args_.state = state_;
  }
  KeptStepArgs(KeptStepArgs&&) = default;  // the vector's buffer moves along
  KeptStepArgs& operator=(KeptStepArgs&&) = default;
  KeptStepArgs(const KeptStepArgs&) = delete;
  KeptStepArgs& operator=(const KeptStepArgs&) = delete;

  const StepArgs& args() const { return args_; }

 private:
  StepArgs args_;
  std::vector<std::span<float>> state_;
};

// One host update with its hyper-parameters bound when it was made: run it
// once, on any thread. set_lr after binding changes only later updates, as
// a card's kernel gets its constants at launch.
using HostStep = absl::AnyInvocable<void() &&>;

// Checks the parts of `args` every optimizer relies on: sizes, dtypes, null
// pointers, step >= 1, finite grad_scale, aligned grad_scale_at (its value
// is not read here). InvalidArgument otherwise.
absl::Status ValidateStepArgs(const StepArgs& args, int state_buffers);

// Hyper-parameters live in the object; the moments live in StepArgs::state,
// so one object serves any number of slices. The steps do not modify the
// object: concurrent calls on disjoint slices are safe, but not
// concurrently with set_lr. Work a step enqueues has its constants already.
//
// Non-virtual interface (as MemoryResource and Communicator): the public
// calls validate once, here, and implementations see only valid arguments.
class Optimizer {
 public:
  virtual ~Optimizer() = default;

  virtual std::string_view name() const = 0;
  // fp32 buffers per element: Adam 2, SGD with momentum 1, plain SGD 0.
  virtual int state_buffers() const = 0;

  // Host memory; runs on all CPU threads of the pool (compute/parallel.h)
  // with the best SIMD level (compute/cpu/isa.h). Blocks until done.
  // InvalidArgument (ValidateStepArgs) before touching anything.
  absl::Status Step(const StepArgs& args);
  // Device-accessible memory; enqueues one fused kernel on `stream` (a
  // cudaStream_t; nullptr is the legacy default stream) and returns. Same
  // arithmetic as Step, bit for bit. Validated as Step.
  absl::Status StepCuda(const StepArgs& args, void* stream);
  // Ordered on `stream`, on the device of a `kind` DeviceSystem, as compute's
  // executors run work (compute/on_device.h): a host stream runs the bound
  // host step as one of its tasks, a card gets StepCuda's kernel, a meta
  // device nothing. Returns once enqueued: the buffers of `args` must stay
  // valid until the stream ran it (args.state's array may go at once).
  // Validated as Step, before anything is enqueued. `wanted` (may be empty)
  // is asked on the host stream's thread just before the step runs; false
  // skips it. A host task can still be called off that way (the engine's,
  // when a collective before it failed on the stream); a card's kernel,
  // once launched, cannot.
  absl::Status Step(const StepArgs& args, DeviceKind kind, Stream* stream,
                    absl::AnyInvocable<bool()> wanted = nullptr);
  // The host update of `args` with the hyper-parameters as they are now,
  // validated as Step: what the stream-ordered Step enqueues on a host
  // stream, and what Step(args) runs at once.
  absl::StatusOr<HostStep> BindHostStep(const StepArgs& args) const;

  // Learning rate as a double, like torch's Python float: the per-step
  // constants are derived in double and rounded once, as torch does.
  // InvalidArgument for a negative or non-finite rate.
  absl::Status set_lr(double lr);
  virtual double lr() const = 0;

 protected:
  // `args` is valid; the step may run after the call returns (keep args in
  // a KeptStepArgs) and on another thread.
  virtual HostStep DoBindHostStep(const StepArgs& args) const = 0;
  virtual absl::Status DoStepCuda(const StepArgs& args, void* stream) = 0;
  virtual void DoSetLr(double lr) = 0;
};

}  // namespace zero
