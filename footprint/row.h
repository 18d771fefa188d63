// One line of the report: a run's measurement beside the formulas.
#pragma once

#include <optional>
#include <string>

#include "footprint/experiment.h"
#include "footprint/formulas.h"

namespace zero::footprint {

struct Row {
  std::string model;
  uint64_t psi = 0;             // parameters
  uint64_t largest_module = 0;  // parameters of the largest module
  int ranks = 1, stage = 0;
  Precision precision = Precision::kBF16;
  OptimizerKind optimizer = OptimizerKind::kAdam;
  Offload offload = Offload::kNone;
  Measurement measured;
  StateBytes paper;    // the ZeRO paper's formula at Ψ
  double padding = 0;  // bytes of this rank's states that are padding
  DeepSpeedFigures deepspeed;
  double across_formula = 0;  // AcrossBytesPerStep for this run's settings
  size_t device_memory = 0;
  // With activations: the options they ran with, the bytes a layer keeps
  // by this program's accounting (activations.h) and by Korthikanti et al.
  std::optional<ActivationOptions> activations;
  uint64_t layer_accounted = 0;
  double layer_paper = 0;
  double recompute = 0;  // RecomputeFraction: FLOPs checkpointing adds

  // params + grads + optimizer state, measured (peaks per tag).
  double states() const;
  bool fits() const { return measured.peak_reserved <= device_memory; }
  // (measured - expected) / expected, in percent; 0 when both are 0.
  static double DiffPercent(double measured, double expected);
  // "zero-7.5b N=64 stage 3 bf16 adam" (+ " offload=optimizer")
  // (+ " seq=4096 mb=1 sdpa" (+ " fused", " cpu") + " ckpt=full").
  std::string Label() const;
};

Row MakeRow(const Experiment& e, const Measurement& m, const Knobs& knobs);

}  // namespace zero::footprint
