#include "bench/footprint/experiment.h"

#include <chrono>
#include <memory>
#include <vector>

#include "base/status_macros.h"
#include "memory/device_system.h"
#include "optimizers/adam.h"
#include "optimizers/sgd.h"
#include "zero/comm/meta_communicator.h"
#include "zero/engine.h"

namespace zero::footprint {
namespace {

DType ToDType(Precision p) {
  switch (p) {
    case Precision::kF32: return DType::kF32;
    case Precision::kBF16: return DType::kBF16;
    case Precision::kF16: return DType::kF16;
  }
  return DType::kF32;
}

absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(OptimizerKind kind) {
  if (kind == OptimizerKind::kAdam) return MakeAdamW();
  return MakeSgd({.momentum = 0.9});
}

// One training step as a training loop drives it.
class StepDriver {
 public:
  StepDriver(const ModelSpec& model, DType dtype)
      : model_(model), order_(model.ForwardOrder()), dtype_(dtype) {
    // A module's gradients are complete at its last backward use, i.e. at
    // its first forward use.
    int id = 0;
    for (const ModuleSpec& m : model.modules) {
      first_param_.push_back(id);
      id += static_cast<int>(m.params.size());
    }
    std::vector<bool> seen(model.modules.size());
    for (int m : order_) {
      first_use_.push_back(!seen[m]);
      seen[m] = true;
    }
  }

  absl::Status Step(Engine& engine) const {
    for (int m : order_) {
      RETURN_IF_ERROR(engine.Fetch(m));
      RETURN_IF_ERROR(engine.Release(m));
    }
    for (size_t i = order_.size(); i-- > 0;) {
      const int m = order_[i];
      RETURN_IF_ERROR(engine.Fetch(m));
      if (first_use_[i]) {
        int id = first_param_[m];
        for (const ParamShape& p : model_.modules[m].params) {
          RETURN_IF_ERROR(engine.AddGrad(id++, nullptr, p.numel(), dtype_));
        }
      }
      RETURN_IF_ERROR(engine.Release(m));
    }
    return engine.Step();
  }

 private:
  const ModelSpec& model_;
  const std::vector<int> order_;
  std::vector<int> first_param_;  // per module: its first parameter's id
  std::vector<bool> first_use_;   // per use
  const DType dtype_;
};

OpStats Minus(const OpStats& a, const OpStats& b) {
  return {a.calls - b.calls, a.elements_sent - b.elements_sent,
          a.elements_received - b.elements_received, a.bytes_sent - b.bytes_sent,
          a.bytes_received - b.bytes_received};
}

Measurement Collect(const Engine& engine, const OpStats& last_step) {
  const EngineStats s = engine.stats();
  Measurement m;
  m.numel = engine.layout().numel();
  m.padded_numel = engine.layout().padded_numel();
  m.units = static_cast<int>(engine.layout().units().size());
  m.params = s.pool.tag(Tag::kParameters).peak;
  m.grads = s.pool.tag(Tag::kGradients).peak;
  m.optimizer = s.pool.tag(Tag::kOptimizerState).peak;
  m.comm = s.pool.tag(Tag::kCommunication).peak;
  m.gathered = s.pool.tag(Tag::kGathered).peak;
  m.other = s.pool.tag(Tag::kOther).peak + s.pool.tag(Tag::kActivations).peak;
  m.peak_allocated = s.pool.peak_allocated;
  m.peak_reserved = s.pool.peak_reserved;
  m.peak_host = s.peak_host_bytes;
  m.sent_per_step = last_step;
  return m;
}

}  // namespace

EngineConfig MakeEngineConfig(const Experiment& e, const Knobs& knobs) {
  EngineConfig config;
  config.stage = e.stage;
  config.param_dtype = ToDType(e.precision);
  config.offload = e.offload;
  config.bucket_elements = knobs.bucket_elements;
  config.prefetch_elements = knobs.prefetch_elements;
  config.persistence_threshold = knobs.persistence_threshold;
  config.max_live_elements = knobs.max_live_elements;
  return config;
}

absl::StatusOr<Measurement> RunExperiment(const Experiment& e, const Knobs& knobs) {
  const auto start = std::chrono::steady_clock::now();
  PoolOptions pool;
  pool.timeline_limit = 0;  // bookkeeping only
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceSystem> devices,
                   DeviceSystem::Create({DeviceSpec::Kind::kMeta, 1, kMetaCapacity}, pool));
  ASSIGN_OR_RETURN(std::unique_ptr<MetaCommunicator> comm, MetaCommunicator::Create(0, e.ranks));
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer, MakeOptimizer(e.optimizer));
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                   Engine::Create(MakeEngineConfig(e, knobs), e.model->ToParamSpecs(),
                                  optimizer.get(), comm.get(), devices.get(), 0));
  const StepDriver driver(*e.model, ToDType(e.precision));
  OpStats before, last;
  for (int step = 0; step < knobs.steps; ++step) {
    before = engine->stats().comm.Total();
    RETURN_IF_ERROR(driver.Step(*engine));
    last = Minus(engine->stats().comm.Total(), before);
  }
  Measurement m = Collect(*engine, last);
  engine.reset();
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return m;
}

}  // namespace zero::footprint
