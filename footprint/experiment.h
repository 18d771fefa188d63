// One footprint experiment: the real engine of rank 0 of an N-rank job, on
// one meta device (addresses and accounting, no bytes) with a
// MetaCommunicator (no peers, ring-model counts), running real training
// steps (step_script.h): forward fetches and releases in the model's
// forward order, then backward in reverse with each module's gradients
// handed over (null data) at its last backward use, then Step; for
// transformer models, each micro-batch's activations allocated and freed
// on the same pool as the model states. Every rank is identical by
// construction (each unit is padded to N * 16 elements and split equally),
// so rank 0's figures are every rank's.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "footprint/activations.h"
#include "footprint/formulas.h"
#include "footprint/model.h"
#include "memory/timeline.h"
#include "zero/comm/comm_stats.h"
#include "zero/config.h"

namespace zero::footprint {

// The engine knobs and run length, shared by every run of a sweep.
struct Knobs {
  size_t bucket_elements = EngineConfig{}.bucket_elements;
  size_t prefetch_elements = EngineConfig{}.prefetch_elements;
  size_t persistence_threshold = EngineConfig{}.persistence_threshold;
  size_t max_live_elements = EngineConfig{}.max_live_elements;
  int steps = 2;
  size_t device_memory = 80'000'000'000;  // the nominal card, for "fits"
  int gpus_per_node = 8;                  // for DeepSpeed's estimators
  // Where offloaded optimizer state goes (--offload_device): nvme keeps
  // master weights and optimizer state in a file per rank (ZeRO-Infinity).
  OffloadDevice offload_device = OffloadDevice::kCpu;
  // Communication across nodes (issue 37), when ranks fill more than one
  // node of gpus_per_node: hierarchical collectives (else one flat ring),
  // hpZ (a node's partition of stage 3's parameters), quantized weights and
  // gradients (bits; 0: off).
  bool hierarchical = true;
  bool hpz = false;
  int quantized_weights_bits = 0;
  int quantized_gradients_bits = 0;
};

struct Experiment {
  const ModelSpec* model = nullptr;
  int ranks = 1;
  int stage = 0;
  Precision precision = Precision::kBF16;
  OptimizerKind optimizer = OptimizerKind::kAdam;
  Offload offload = Offload::kNone;
  // Activations of one micro-batch (element_bytes is taken from
  // `precision`); none when nullopt or the model has no transformer shape.
  std::optional<ActivationOptions> activations = std::nullopt;

  // `activations` with element_bytes set, or nullopt when there are none.
  std::optional<ActivationOptions> ActivationsFor() const;
};

// The pool during the last step, for a picture of it (timeline_svg.h).
struct StepTimeline {
  std::array<size_t, kNumTags> start{};  // requested bytes per tag when the step began
  std::vector<TraceEvent> events;        // the pool's events during the step
  size_t backward = 0, optimizer = 0;    // the first event of each phase
};

struct Measurement {
  uint64_t numel = 0, padded_numel = 0;  // from the engine's Layout
  int units = 0;
  // Peak requested bytes per pool tag.
  // comm: buckets and staging in flight; gathered: stage 3's whole
  // parameters of the modules in use (and prefetched, and persistent).
  size_t params = 0, grads = 0, optimizer = 0, comm = 0, gathered = 0, other = 0;
  // Activations: the tag's peak, and what the middle layer keeps between
  // its forward and its backward (the activations tag across that layer).
  bool has_activations = false;
  size_t activations = 0;
  uint64_t layer_activations = 0;
  size_t peak_allocated = 0, peak_reserved = 0;  // the pool, all tags together
  size_t peak_host = 0;                          // pinned host memory (offload)
  size_t nvme = 0;                               // in the rank's NVMe file (ZeRO-Infinity)
  OpStats sent_per_step;                         // the last step's traffic
  // The last step's bytes sent by level: inside the node, across nodes. A
  // flat ring's across is its mean per rank (its nodes' last ranks carry it
  // all); hierarchical collectives send the same across on every rank.
  uint64_t inside_per_step = 0, across_per_step = 0;
  double seconds = 0;                            // wall time of this run
};

// The capacity of the meta device: large enough never to refuse.
inline constexpr size_t kMetaCapacity = size_t{1} << 50;  // 1 PiB

EngineConfig MakeEngineConfig(const Experiment& e, const Knobs& knobs);

// Errors from the engine (a config it rejects, say) come back as they are.
// With `timeline`, the pool records its events and the last step's are
// written there.
absl::StatusOr<Measurement> RunExperiment(const Experiment& e, const Knobs& knobs,
                                          StepTimeline* timeline = nullptr);

}  // namespace zero::footprint
