#include "footprint/experiment.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "footprint/step_runner.h"
#include "footprint/step_script.h"
#include "memory/device_system.h"
#include "optimizers/adam.h"
#include "optimizers/sgd.h"
#include "zero/comm/hierarchical_communicator.h"
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
  m.other = s.pool.tag(Tag::kOther).peak;
  m.activations = s.pool.tag(Tag::kActivations).peak;
  m.peak_allocated = s.pool.peak_allocated;
  m.peak_reserved = s.pool.peak_reserved;
  m.peak_host = s.peak_host_bytes;
  m.nvme = s.nvme_bytes;
  m.sent_per_step = last_step;
  return m;
}

}  // namespace

EngineConfig MakeEngineConfig(const Experiment& e, const Knobs& knobs) {
  EngineConfig config;
  config.stage = e.stage;
  config.param_dtype = ToDType(e.precision);
  config.offload = e.offload;
  if (e.offload != Offload::kNone && knobs.offload_device == OffloadDevice::kNvme) {
    config.offload_device = OffloadDevice::kNvme;
    config.nvme_path = "/nvme";  // meta devices: books only, no file is made
  }
  config.bucket_elements = knobs.bucket_elements;
  config.prefetch_elements = knobs.prefetch_elements;
  config.persistence_threshold = knobs.persistence_threshold;
  config.max_live_elements = knobs.max_live_elements;
  // Each setting where it applies, so one sweep covers every stage.
  if (e.stage == 3) config.quantized_weights_bits = knobs.quantized_weights_bits;
  if (e.stage >= 1) config.quantized_gradients_bits = knobs.quantized_gradients_bits;
  if (knobs.hpz && e.stage == 3 && knobs.hierarchical && e.ranks > knobs.gpus_per_node &&
      e.ranks % knobs.gpus_per_node == 0) {
    config.hpz_partition_size = knobs.gpus_per_node;
  }
  return config;
}

std::optional<ActivationOptions> Experiment::ActivationsFor() const {
  if (!activations.has_value() || !model->transformer.has_value() || model->sites.empty()) {
    return std::nullopt;
  }
  ActivationOptions o = *activations;
  o.element_bytes = static_cast<uint64_t>(ParamBytes(precision));
  return o;
}

namespace {

// Pool events beyond this make --timeline an error rather than a picture
// of part of a step.
constexpr size_t kTimelineEvents = size_t{1} << 22;

// What the last step records: the activations tag at each layer mark, and
// with a timeline the pool's events from the step's start.
class LastStep {
 public:
  LastStep(DevicePool& pool, int layers, StepTimeline* timeline)
      : pool_(pool), layer_bytes_(layers + 1), timeline_(timeline) {}

  void Begin() {
    if (timeline_ == nullptr) return;
    const PoolStats stats = pool_.stats();
    for (int t = 0; t < kNumTags; ++t) timeline_->start[t] = stats.tags[t].current;
    first_event_ = pool_.timeline().events().size();
  }
  void OnMark(int mark) {
    if (mark >= kLayer) {
      layer_bytes_[mark] = pool_.stats().tag(Tag::kActivations).current;
    } else if (timeline_ != nullptr) {
      (mark == kBackward ? timeline_->backward : timeline_->optimizer) =
          pool_.timeline().events().size() - first_event_;
    }
  }
  absl::Status End() {
    if (timeline_ == nullptr) return absl::OkStatus();
    if (pool_.timeline().dropped() > 0) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "--timeline: the steps made more than %d pool events", kTimelineEvents));
    }
    std::vector<TraceEvent> all = pool_.timeline().events();
    timeline_->events.assign(all.begin() + first_event_, all.end());
    return absl::OkStatus();
  }
  // The middle layer's bytes between its forward and its backward.
  uint64_t MiddleLayer() const {
    if (layer_bytes_.size() < 2) return 0;
    const size_t k = (layer_bytes_.size() - 1) / 2;
    return layer_bytes_[k + 1] - layer_bytes_[k];
  }

 private:
  DevicePool& pool_;
  std::vector<size_t> layer_bytes_;
  StepTimeline* const timeline_;
  size_t first_event_ = 0;
};

}  // namespace

namespace {

// Rank 0's communicator: one level (a flat ring) on one node or when
// hierarchical collectives are off, else the two groups of its node and of
// its local rank, each rank 0 of a meta group.
absl::StatusOr<std::unique_ptr<Communicator>> MetaGroup(int ranks, const Knobs& knobs,
                                                        DeviceSystem& devices) {
  const int per_node = knobs.gpus_per_node;
  if (!knobs.hierarchical || ranks <= per_node || ranks % per_node != 0) {
    return MetaCommunicator::Create(0, ranks);
  }
  ASSIGN_OR_RETURN(const Topology topology, Topology::Create(ranks, per_node));
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> intra, MetaCommunicator::Create(0, per_node));
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> inter,
                   MetaCommunicator::Create(0, topology.nodes()));
  return MakeHierarchicalCommunicator(topology, 0, std::move(intra), std::move(inter),
                                      &devices.pool(0));
}

}  // namespace

absl::StatusOr<Measurement> RunExperiment(const Experiment& e, const Knobs& knobs,
                                          StepTimeline* timeline) {
  const auto start = std::chrono::steady_clock::now();
  const std::optional<ActivationOptions> activations = e.ActivationsFor();
  ASSIGN_OR_RETURN(const StepScript script, BuildStepScript(*e.model, activations));
  PoolOptions pool;
  pool.timeline_limit = timeline != nullptr ? kTimelineEvents : 0;
  DeviceSpec meta;  // one meta device; fields by name, the others at their defaults
  meta.kind = DeviceSpec::Kind::kMeta;
  meta.count = 1;
  meta.capacity = kMetaCapacity;
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceSystem> devices, DeviceSystem::Create(meta, pool));
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, MetaGroup(e.ranks, knobs, *devices));
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer, MakeOptimizer(e.optimizer));
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                   Engine::Create(MakeEngineConfig(e, knobs), e.model->ToParamSpecs(),
                                  optimizer.get(), comm.get(), devices.get(), 0));
  StepRunner runner(script, *e.model, ToDType(e.precision), *engine, devices->pool(0));
  LastStep last_step(devices->pool(0), script.layers, timeline);
  OpStats before, last;
  LevelBytes inside_before, across_before;
  for (int step = 0; step < knobs.steps; ++step) {
    const bool final_step = step + 1 == knobs.steps;
    if (final_step) last_step.Begin();
    const CommStats stats = engine->stats().comm;
    before = stats.Total();
    inside_before = stats.inside;
    across_before = stats.across;
    RETURN_IF_ERROR(runner.Step([&](int mark) {
      if (final_step) last_step.OnMark(mark);
    }));
    last = Minus(engine->stats().comm.Total(), before);
  }
  RETURN_IF_ERROR(last_step.End());
  Measurement m = Collect(*engine, last);
  const CommStats after = engine->stats().comm;
  if (comm->levels().has_value()) {
    m.inside_per_step = after.inside.sent - inside_before.sent;
    m.across_per_step = after.across.sent - across_before.sent;
  } else {
    // Rank 0 of a flat ring sends to its neighbour in its node; a node's
    // last rank sends everything across: 1 in gpus_per_node on average.
    const int per_node = std::min(knobs.gpus_per_node, e.ranks);
    m.across_per_step = e.ranks > per_node ? last.bytes_sent / per_node : 0;
    m.inside_per_step = last.bytes_sent - m.across_per_step;
  }
  m.has_activations = activations.has_value();
  m.layer_activations = last_step.MiddleLayer();
  engine.reset();
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return m;
}

}  // namespace zero::footprint
