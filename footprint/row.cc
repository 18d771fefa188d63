#include "footprint/row.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "footprint/names.h"

namespace zero::footprint {

double Row::states() const {
  return static_cast<double>(measured.params) + static_cast<double>(measured.grads) +
         static_cast<double>(measured.optimizer);
}

double Row::DiffPercent(double measured, double expected) {
  if (expected == 0) return measured == 0 ? 0 : INFINITY;
  return 100.0 * (measured - expected) / expected;
}

std::string Row::Label() const {
  std::string label = absl::StrFormat("%s N=%d stage %d %s %s", model, ranks, stage,
                                      Name(precision), Name(optimizer));
  if (offload != Offload::kNone) absl::StrAppend(&label, " offload=", std::string(Name(offload)));
  if (paper.nvme > 0) absl::StrAppend(&label, " device=nvme");
  if (activations.has_value()) {
    absl::StrAppend(&label, " seq=", activations->seq, " mb=", activations->micro_batch, " ",
                    std::string(Name(activations->attention)));
    // transformers kernels on a card are the default: said only otherwise.
    if (activations->kernels == Kernels::kFused) {
      absl::StrAppend(&label, " fused");
    } else if (activations->backend == Backend::kCpu) {
      absl::StrAppend(&label, " cpu");
    }
    if (activations->checkpointing != Checkpointing::kNone) {
      absl::StrAppend(&label, " ckpt=", std::string(Name(activations->checkpointing)));
    }
  }
  return label;
}

Row MakeRow(const Experiment& e, const Measurement& m, const Knobs& knobs) {
  Row row;
  row.model = e.model->name;
  row.psi = m.numel;
  row.largest_module = e.model->largest_module_numel();
  row.ranks = e.ranks;
  row.stage = e.stage;
  row.precision = e.precision;
  row.optimizer = e.optimizer;
  row.offload = e.offload;
  row.measured = m;
  FormulaInput in{.psi = static_cast<double>(m.numel),
                  .ranks = e.ranks,
                  .stage = e.stage,
                  .precision = e.precision,
                  .optimizer = e.optimizer,
                  .offload = e.offload,
                  .nvme = e.offload != Offload::kNone &&
                          knobs.offload_device == OffloadDevice::kNvme};
  row.paper = PaperModelStates(in);
  row.deepspeed =
      DeepSpeedEstimate(in, static_cast<double>(row.largest_module), knobs.gpus_per_node);
  // The same formula over the padding elements: what they cost this rank.
  in.psi = static_cast<double>(m.padded_numel - m.numel);
  const StateBytes pad = PaperModelStates(in);
  row.padding = pad.device() + pad.host + pad.nvme;
  row.across_formula = AcrossBytesPerStep(
      {.psi = static_cast<double>(m.numel),
       .ranks = e.ranks,
       .gpus_per_node = knobs.gpus_per_node,
       .stage = e.stage,
       .param_bytes = ParamBytes(e.precision),
       .hierarchical = knobs.hierarchical,
       .hpz = knobs.hpz,
       .weight_bits = knobs.quantized_weights_bits,
       .gradient_bits = knobs.quantized_gradients_bits,
       .block = EngineConfig{}.quantization_block});
  row.device_memory = knobs.device_memory;
  row.activations = e.ActivationsFor();
  if (row.activations.has_value()) {
    row.layer_accounted = LayerSavedBytes(*e.model->transformer, *row.activations).value_or(0);
    row.layer_paper = KorthikantiLayerBytes(*e.model->transformer, *row.activations);
    row.recompute = RecomputeFraction(*e.model->transformer, *row.activations);
  }
  return row;
}

}  // namespace zero::footprint
