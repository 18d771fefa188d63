#include "footprint/report_fields.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "footprint/names.h"

namespace zero::footprint {
namespace {

std::string Int(double v) { return absl::StrFormat("%.0f", std::round(v)); }
std::string Num(double v) { return std::isfinite(v) ? absl::StrFormat("%.6g", v) : "null"; }

}  // namespace

std::vector<Field> Fields(const Row& r) {
  const Measurement& m = r.measured;
  const OpStats& sent = m.sent_per_step;
  const double peak = static_cast<double>(m.peak_allocated);
  const std::optional<ActivationOptions>& act = r.activations;
  const bool paper = act.has_value() && act->element_bytes == 2;  // the formula is 16-bit
  std::vector<Field> f = {
      {"model", r.model, true},
      {"psi", absl::StrCat(r.psi)},
      {"padded_numel", absl::StrCat(m.padded_numel)},
      {"units", absl::StrCat(m.units)},
      {"largest_module", absl::StrCat(r.largest_module)},
      {"ranks", absl::StrCat(r.ranks)},
      {"stage", absl::StrCat(r.stage)},
      {"precision", std::string(Name(r.precision)), true},
      {"optimizer", std::string(Name(r.optimizer)), true},
      {"offload", std::string(Name(r.offload)), true},
      {"params_bytes", absl::StrCat(m.params)},
      {"grads_bytes", absl::StrCat(m.grads)},
      {"optimizer_bytes", absl::StrCat(m.optimizer)},
      {"comm_bytes", absl::StrCat(m.comm)},
      {"gathered_bytes", absl::StrCat(m.gathered)},
      {"other_bytes", absl::StrCat(m.other)},
      {"seq", act ? absl::StrCat(act->seq) : "null"},
      {"micro_batch", act ? absl::StrCat(act->micro_batch) : "null"},
      {"kernels", act ? std::string(Name(act->kernels)) : "null", act.has_value()},
      {"attention", act ? std::string(Name(act->attention)) : "null", act.has_value()},
      {"backend", act ? std::string(Name(act->backend)) : "null", act.has_value()},
      {"checkpointing", act ? std::string(Name(act->checkpointing)) : "null", act.has_value()},
      {"activations_bytes", act ? absl::StrCat(m.activations) : "null"},
      {"layer_activations_bytes", act ? absl::StrCat(m.layer_activations) : "null"},
      {"layer_accounted_bytes", act ? absl::StrCat(r.layer_accounted) : "null"},
      {"layer_paper_bytes", paper ? Int(r.layer_paper) : "null"},
      {"layer_vs_paper_percent",
       paper ? Num(Row::DiffPercent(m.layer_activations, r.layer_paper)) : "null"},
      {"host_bytes", absl::StrCat(m.peak_host)},
      {"nvme_bytes", absl::StrCat(m.nvme)},
      {"padding_bytes", Int(r.padding)},
      {"states_bytes", Int(r.states())},
      {"peak_allocated_bytes", absl::StrCat(m.peak_allocated)},
      {"peak_reserved_bytes", absl::StrCat(m.peak_reserved)},
      {"device_memory_bytes", absl::StrCat(r.device_memory)},
      {"fits", r.fits() ? "true" : "false"},
      {"paper_params_bytes", Int(r.paper.params)},
      {"paper_grads_bytes", Int(r.paper.grads)},
      {"paper_optimizer_bytes", Int(r.paper.optimizer)},
      {"paper_host_bytes", Int(r.paper.host)},
      {"paper_nvme_bytes", Int(r.paper.nvme)},
      {"paper_states_bytes", Int(r.paper.device())},
      {"states_vs_paper_percent", Num(Row::DiffPercent(r.states(), r.paper.device()))},
      {"deepspeed_gpu_bytes", r.deepspeed.available ? Int(r.deepspeed.gpu) : "null"},
      {"deepspeed_cpu_node_bytes", r.deepspeed.available ? Int(r.deepspeed.cpu_node) : "null"},
      {"deepspeed_cpu_rank_bytes", r.deepspeed.available ? Int(r.deepspeed.cpu_rank) : "null"},
      {"deepspeed_nvme_rank_bytes", r.deepspeed.available ? Int(r.deepspeed.nvme_rank) : "null"},
      {"peak_vs_deepspeed_percent",
       r.deepspeed.available ? Num(Row::DiffPercent(peak, r.deepspeed.gpu)) : "null"},
      {"collective_calls_per_step", absl::StrCat(sent.calls)},
      {"elements_sent_per_step", absl::StrCat(sent.elements_sent)},
      {"bytes_sent_per_step", absl::StrCat(sent.bytes_sent)},
      {"elements_received_per_step", absl::StrCat(sent.elements_received)},
      {"bytes_inside_per_step", absl::StrCat(m.inside_per_step)},
      {"bytes_across_per_step", absl::StrCat(m.across_per_step)},
      {"zeropp_across_formula_bytes", Int(r.across_formula)},
      {"sent_over_psi", Num(r.psi ? sent.elements_sent / static_cast<double>(r.psi) : 0)},
      {"seconds", absl::StrFormat("%.3f", m.seconds)},
  };
  return f;
}

}  // namespace zero::footprint
