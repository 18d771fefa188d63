#include "zero/model_state_formula.h"

namespace zero {

ModelStateBytes ModelStateFormula(const ModelStateInput& in) {
  const double psi = in.psi, n = in.ranks, p = in.param_bytes, g = in.grad_bytes;
  const double k = in.optimizer_bytes;
  ModelStateBytes out;
  out.params = in.stage == 3 ? p * psi / n : p * psi;
  if (!in.offload_optimizer) {
    out.grads = in.stage >= 2 ? g * psi / n : g * psi;
    if (in.stage == 1 && in.accumulation > 1) out.grads += g * psi / n;
    out.optimizer = in.stage == 0 ? k * psi : k * psi / n;
    return out;
  }
  // The host keeps fp32 master weights even when the model is fp32 (the
  // device's parameters are then the only copy there): K less the master
  // it counts is the moments.
  const double moments = k - (p < 4 ? 4 : 0);
  out.host = (4 + moments + 4) * (in.stage == 0 ? psi : psi / n);
  out.grads = in.stage >= 2 ? 0 : g * psi;
  if (in.offload_parameters && in.stage == 3) {
    out.host += out.params;
    out.params = 0;
  }
  if (in.nvme) {
    out.nvme = (4 + moments) * psi / n;  // offload needs stage >= 1: pieces
    out.host -= out.nvme;
  }
  return out;
}

}  // namespace zero
