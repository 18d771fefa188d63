// What the literature predicts for one rank's model states, beside which
// the experiment prints what it measured.
//
// The ZeRO paper's formula, with offload and NVMe, is zero's
// (zero/model_state_formula.h: p bytes per parameter, g per gradient, K per
// element of optimizer state); this experiment gives it, per run:
//   precision  optimizer          p  g  K
//   bf16/fp16  Adam(W)            2  2  12  (master 4 + exp_avg 4 + exp_avg_sq 4)
//   bf16/fp16  SGD, momentum      2  2   8  (master 4 + momentum 4)
//   fp32       Adam(W)            4  4   8  (the parameters are the master)
//   fp32       SGD, momentum      4  4   4
// So mixed-precision Adam is the paper's 16Ψ, 4Ψ + 12Ψ/N, 2Ψ + 14Ψ/N, 16Ψ/N.
//
// DeepSpeed's estimators (deepspeed.runtime.zero; reproduced arithmetic,
// int() truncation included; they assume mixed-precision Adam whatever the
// run uses, and "cpu" is per node):
//   estimate_zero2_model_states_mem_needs(Ψ, gpus_per_node, nodes, cpu_offload,
//       additional_buffer_factor=1.5), used for stages 1 and 2:
//     offload: gpu = 2Ψ;              cpu = Ψ · max(4·gpus, 16) · 1.5
//     else:    gpu = 4Ψ + int(16Ψ/gpus); cpu = Ψ · 4 · gpus_per_node · 1.5
//   estimate_zero3_model_states_mem_needs(Ψ, largest_layer, gpus_per_node,
//       nodes, cpu_offload, cpu_offload_params, zero_init=True, 1.5), stage 3:
//     L = 4 · largest_layer
//     offload params:    gpu = L;                  cpu = Ψ · 18 · (1/nodes) · 1.5
//     offload optimizer: gpu = L + int(2Ψ/gpus);   cpu = Ψ · 16 · (1/nodes) · 1.5
//     neither:           gpu = L + int(18Ψ/gpus);  cpu = largest_layer · 4 · gpus_per_node · 1.5
//   (zero_init=False replaces the cpu figures with Ψ · max(4·gpus_per_node,
//   18 or 16 · 1/nodes) · 1.5, or Ψ · 4 · gpus_per_node · 1.5.) Stage 0 has no
//   estimator.
#pragma once

#include <cstdint>

#include "zero/config.h"
#include "zero/model_state_formula.h"

namespace zero::footprint {

enum class Precision { kF32, kBF16, kF16 };
enum class OptimizerKind { kAdam, kSgd };

using StateBytes = ModelStateBytes;  // device (params, grads, optimizer), host, nvme

struct FormulaInput {
  double psi = 0;  // parameters (or padding elements)
  int ranks = 1;
  int stage = 0;
  Precision precision = Precision::kBF16;
  OptimizerKind optimizer = OptimizerKind::kAdam;
  Offload offload = Offload::kNone;
  bool nvme = false;  // offloaded master weights and optimizer state on NVMe
};

// Bytes per element: p (= g) and K of the table above.
double ParamBytes(Precision precision);
double StateBytesPerElement(Precision precision, OptimizerKind optimizer);

// The ZeRO paper's model states of one rank.
StateBytes PaperModelStates(const FormulaInput& in);

// ZeRO++'s accounting (arXiv 2306.10209, section 3) of the bytes one rank
// sends across nodes in a step, in this program's collectives: each
// collective over Ψ elements sends (nodes - 1) / N of them across on every
// rank when hierarchical, and (N - 1) / N on a node's last rank when a flat
// ring (the mean over ranks: that over gpus_per_node). Stage 3 sends the
// weights twice (forward and backward gathers; once with hpZ) and the
// gradients once (reduced in fp32, 4 bytes, or quantized: bits / 8 plus a
// 4-byte scale per block); stages 1-2 the gradients and the weights after
// the step; stage 0 the gradients twice (all-reduce). Persistent units and
// padding are left out. ZeRO-3: 3 Ψ units, ZeRO++: 0.75 (int8 weights, hpZ,
// int4 gradients, at 2-byte weights).
struct AcrossInput {
  double psi = 0;
  int ranks = 1, gpus_per_node = 8, stage = 3;
  double param_bytes = 2;
  bool hierarchical = true, hpz = false;
  int weight_bits = 0, gradient_bits = 0;
  size_t block = 512;
};
double AcrossBytesPerStep(const AcrossInput& in);

struct Zero2Estimate {
  int64_t cpu = 0, gpu = 0;
};
Zero2Estimate EstimateZero2(double total_params, int gpus_per_node, int nodes, bool cpu_offload,
                            double additional_buffer_factor = 1.5);

struct Zero3Estimate {
  int64_t cpu = 0, gpu = 0, largest_layer_memory = 0;
};
Zero3Estimate EstimateZero3(double total_params, double largest_layer_params, int gpus_per_node,
                            int nodes, bool cpu_offload, bool cpu_offload_params,
                            bool zero_init = true, double additional_buffer_factor = 1.5);

// The estimator that applies to a run, with N ranks placed on nodes of
// gpus_per_node (fewer ranks: one node of N).
struct DeepSpeedFigures {
  bool available = false;  // stage 0: no estimator
  double gpu = 0;          // bytes per GPU
  double cpu_node = 0;     // bytes per node
  double cpu_rank = 0;     // cpu_node / GPUs per node
  // ZeRO-Infinity (arXiv 2104.07857, section 3): with the optimizer on NVMe
  // its states there are fp32 master, moments and fp32 gradients, 16 bytes
  // a parameter with Adam (12 with momentum SGD), over the ranks.
  double nvme_rank = 0;
};
DeepSpeedFigures DeepSpeedEstimate(const FormulaInput& in, double largest_layer_params,
                                   int gpus_per_node);

}  // namespace zero::footprint
