// The ZeRO engine of one rank: wraps any Optimizer and partitions its state
// (stage 1), the gradients (stage 2) and, later, the parameters (stage 3)
// across the ranks of a Communicator. A training loop uses the same calls at
// every stage:
//
//   auto engine = Engine::Create(config, params, &adam, comm, &devices, rank);
//   for each step:
//     for each micro-batch:
//       forward, per module m: Fetch(m); use engine->param(i); Release(m)
//       backward, per module in reverse: Fetch(m); AddGrad(i, grad); Release(m)
//     engine->Step();
//
// Fetch and Release cost nothing below stage 3, where parameters are whole.
//
// Arithmetic is the same at every stage: each micro-batch's gradients are
// summed over ranks in rank order, micro-batches are accumulated in order,
// and the optimizer sees (sum) * 1/(ranks * micro-batches). So sharded
// training equals unsharded training bit for bit in fp32.
//
// An error that leaves this rank unable to follow its peers (a missing or
// malformed gradient, a collective that failed) also aborts the
// communicator, so every rank gets an error instead of waiting forever.
// One thread drives an engine; its buffers come from `device`'s pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "memory/device_system.h"
#include "optimizers/optimizer.h"
#include "zero/buffer.h"
#include "zero/comm/communicator.h"
#include "zero/config.h"
#include "zero/fingerprint.h"
#include "zero/layout.h"

namespace zero {

struct EngineStats {
  int64_t steps = 0;
  double last_grad_norm = 0;  // when clipping is on
  int micro_batches = 0;  // completed in the current step
  PoolStats pool;         // this rank's device, all tags
  CommStats comm;
};

class Engine {
 public:
  // Collective: every rank calls it with the same parameters and config;
  // differing layouts are an error on every rank. Does not own `optimizer`,
  // `comm` or `devices`, which must outlive the engine.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const EngineConfig& config,
                                                        std::vector<ParamSpec> params,
                                                        Optimizer* optimizer,
                                                        Communicator* comm,
                                                        DeviceSystem* devices, int device);
  ~Engine();

  const Layout& layout() const { return layout_; }
  const EngineConfig& config() const { return config_; }

  // The full fp32 values of parameter `id`, identical on every rank after
  // each Step. At stage 3 only while its module is fetched (else
  // FailedPrecondition), and writes to it are not kept: use SetParam.
  absl::StatusOr<std::span<float>> param(int id);
  // Sets parameter `id` (every rank with the same values), e.g. at start.
  absl::Status SetParam(int id, std::span<const float> values);

  // Collective at stage 3: gathers the parameters of `module` (and, after
  // the first step, prefetches the next modules of the recorded order).
  // Calls nest: a module stays fetched until every Fetch has its Release.
  absl::Status Fetch(int module);
  absl::Status Release(int module);
  // Elements gathered now, beyond this rank's own pieces (stage 3).
  size_t live_gathered_elements() const { return live_elements_; }

  // Hands over this micro-batch's gradient of parameter `id` (copied). Each
  // parameter once per micro-batch; a unit is reduced as soon as it and all
  // later units are complete, so reverse registration order overlaps best.
  absl::Status AddGrad(int id, const void* grad, size_t numel, DType dtype = DType::kF32);
  absl::Status AddGrad(int id, std::span<const float> grad) {
    return AddGrad(id, grad.data(), grad.size(), DType::kF32);
  }

  // Collective: after gradient_accumulation_steps complete micro-batches,
  // updates the parameters and makes them whole again on every rank.
  absl::Status Step();
  // Drops the gradients of the current step (and of a partial micro-batch).
  absl::Status ZeroGrad();

  EngineStats stats() const;

 private:
  struct UnitState {
    int received = 0;      // parameters handed over in this micro-batch
    Buffer staging;        // gradients of the unit in flight (when not in grads_)
    Buffer gathered;       // stage 3: the whole unit, while fetched
    bool persistent = false;
  };

  Engine(const EngineConfig& config, Layout layout, Optimizer* optimizer, Communicator* comm,
         DeviceSystem* devices, int device);
  absl::Status AllocateModelStates();
  // Every rank shares `mine`; any difference fails them all alike.
  absl::Status CheckAgreement(uint64_t mine, const std::string& what);
  absl::Status Fail(absl::Status status);  // aborts the group, returns status

  // Gradient flow (engine_grads.cc).
  absl::StatusOr<float*> StagingFor(int unit);
  absl::Status ReduceReadyUnits();
  absl::Status ReduceUnit(int unit);
  float* OwnedGrad(int unit);
  absl::Status Accumulate(float* into, const float* from, size_t count);
  void ResetMicroBatch();

  // Update (engine.cc).
  absl::Status UpdateUnit(int unit, float grad_scale);
  // The averaged gradient's global L2 norm (clip.cc); 0 on meta devices.
  absl::StatusOr<double> GlobalGradNorm(float grad_scale);

  // Stage 3 (engine_stage3.cc).
  absl::Status InitModules();  // module -> units; stage 3: persistent units
  absl::Status GatherUnit(int unit);
  absl::Status Prefetch();
  bool ReusedSoon(int module) const;
  absl::Status FinishStepStage3();
  float* param_data(int unit);  // where a unit's whole values are, or null

  float* params_full() const { return params_.data<float>(); }
  size_t owned_offset(int unit) const;  // this rank's piece in the flat buffer
  bool has_bytes() const { return devices_->backend().has_bytes(); }

  const EngineConfig config_;
  const Layout layout_;
  Optimizer* const optimizer_;
  Communicator* const comm_;
  DeviceSystem* const devices_;
  DevicePool* const pool_;
  Stream* const stream_;
  const int rank_;

  Buffer params_;                  // fp32 parameters: whole (stages 0-2) or pieces (3)
  Buffer grads_;                   // stage 0-1: flat gradients, whole
  Buffer owned_grads_;             // stage 1 (accumulating), 2-3: this rank's pieces
  std::vector<Buffer> state_;      // optimizer state: whole (stage 0) or pieces
  std::vector<UnitState> units_;
  std::vector<uint8_t> received_;  // per parameter, in this micro-batch
  int next_unit_to_reduce_;        // units reduce from the last to the first
  int micro_batches_ = 0;
  int64_t steps_ = 0;
  double last_grad_norm_ = 0;

  // Stage 3 bookkeeping.
  std::vector<std::vector<int>> module_units_;  // module -> its units
  std::vector<int> fetch_count_;                // per module: Fetch minus Release
  std::vector<int> trace_;                      // modules fetched this step, in order
  std::vector<int> order_;                      // the first step's trace
  size_t live_elements_ = 0;
};

}  // namespace zero
