#include "footprint/formulas.h"

#include <algorithm>

namespace zero::footprint {

double ParamBytes(Precision precision) { return precision == Precision::kF32 ? 4 : 2; }

double StateBytesPerElement(Precision precision, OptimizerKind optimizer) {
  const double moments = optimizer == OptimizerKind::kAdam ? 8 : 4;
  const double master = precision == Precision::kF32 ? 0 : 4;
  return master + moments;
}

double AcrossBytesPerStep(const AcrossInput& in) {
  const int g = in.gpus_per_node;
  if (in.ranks <= g || in.ranks % g != 0) return 0;  // one node, or nodes this program won't form
  const double n = in.ranks, nodes = n / g;
  const double share = in.hierarchical ? (nodes - 1) / n : (n - 1) / n / g;
  auto quantized = [&](int bits, double plain) {
    return bits == 0 ? plain : bits / 8.0 + 4.0 / static_cast<double>(in.block);
  };
  const double w = quantized(in.stage == 3 ? in.weight_bits : 0, in.param_bytes);
  const double grad = quantized(in.stage >= 1 ? in.gradient_bits : 0, 4);
  double bytes = 0;
  switch (in.stage) {
    case 0: bytes = 2 * grad; break;
    case 1:
    case 2: bytes = grad + in.param_bytes; break;
    default: bytes = w + (in.hpz && in.hierarchical ? 0 : w) + grad; break;
  }
  return in.psi * share * bytes;
}

StateBytes PaperModelStates(const FormulaInput& in) {
  const double p = ParamBytes(in.precision);
  return ModelStateFormula({.psi = in.psi,
                            .ranks = in.ranks,
                            .stage = in.stage,
                            .param_bytes = p,
                            .grad_bytes = p,
                            .optimizer_bytes = StateBytesPerElement(in.precision, in.optimizer),
                            .offload_optimizer = in.offload != Offload::kNone,
                            .offload_parameters = in.offload == Offload::kParameters,
                            .nvme = in.nvme});
}

Zero2Estimate EstimateZero2(double total_params, int gpus_per_node, int nodes, bool cpu_offload,
                            double additional_buffer_factor) {
  const double total_gpus = static_cast<double>(nodes) * gpus_per_node;
  double cpu = 0, gpu = 0;
  if (cpu_offload) {
    gpu = 2 * total_params;
    cpu = total_params * std::max(4 * total_gpus, 16.0) * additional_buffer_factor;
  } else {
    gpu = 4 * total_params +
          static_cast<double>(static_cast<int64_t>(16 * total_params / total_gpus));
    cpu = total_params * 4 * gpus_per_node * additional_buffer_factor;
  }
  return {static_cast<int64_t>(cpu), static_cast<int64_t>(gpu)};
}

Zero3Estimate EstimateZero3(double total_params, double largest_layer_params, int gpus_per_node,
                            int nodes, bool cpu_offload, bool cpu_offload_params, bool zero_init,
                            double additional_buffer_factor) {
  const double total_gpus = static_cast<double>(nodes) * gpus_per_node;
  const double gpus_factor = 1.0 / nodes;
  const double largest_layer_memory = 4 * largest_layer_params;
  auto trunc = [](double x) { return static_cast<double>(static_cast<int64_t>(x)); };
  double cpu = 0, gpu = 0;
  if (cpu_offload) {
    const double per_param = cpu_offload_params ? 18 : 16;
    gpu = cpu_offload_params ? largest_layer_memory
                             : largest_layer_memory + trunc(2 * total_params / total_gpus);
    cpu = zero_init ? total_params * per_param * gpus_factor * additional_buffer_factor
                    : total_params * std::max(4.0 * gpus_per_node, per_param * gpus_factor) *
                          additional_buffer_factor;
  } else {
    gpu = largest_layer_memory + trunc(18 * total_params / total_gpus);
    cpu = zero_init ? largest_layer_params * 4 * gpus_per_node * additional_buffer_factor
                    : total_params * 4 * gpus_per_node * additional_buffer_factor;
  }
  return {static_cast<int64_t>(cpu), static_cast<int64_t>(gpu),
          static_cast<int64_t>(largest_layer_memory)};
}

DeepSpeedFigures DeepSpeedEstimate(const FormulaInput& in, double largest_layer_params,
                                   int gpus_per_node) {
  DeepSpeedFigures out;
  if (in.stage == 0) return out;
  // DeepSpeed's estimators take nodes x GPUs per node: ranks that fill no
  // whole number of nodes are estimated as one node of them all (rounding
  // the nodes up estimated more GPUs than the run has: 16 for 12).
  int per_node = std::min(in.ranks, gpus_per_node);
  if (in.ranks % per_node != 0) per_node = in.ranks;
  const int nodes = in.ranks / per_node;
  const bool offload = in.offload != Offload::kNone;
  out.available = true;
  if (in.stage <= 2) {
    const Zero2Estimate e = EstimateZero2(in.psi, per_node, nodes, offload);
    out.gpu = static_cast<double>(e.gpu);
    out.cpu_node = static_cast<double>(e.cpu);
  } else {
    const Zero3Estimate e = EstimateZero3(in.psi, largest_layer_params, per_node, nodes, offload,
                                          in.offload == Offload::kParameters);
    out.gpu = static_cast<double>(e.gpu);
    out.cpu_node = static_cast<double>(e.cpu);
  }
  out.cpu_rank = out.cpu_node / per_node;
  if (offload && in.nvme) {
    const double moments = in.optimizer == OptimizerKind::kAdam ? 8 : 4;
    out.nvme_rank = (4 + moments + 4) * in.psi / in.ranks;
  }
  return out;
}

}  // namespace zero::footprint
