// zero_model_state_bytes over zero/model_state_formula.h: the one formula,
// which the footprint experiment prints and the Python package's
// memory_summary compares with what the engine holds. Checks the plain
// numbers it is given, so a caller's mistake is an error, not a figure.
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "zero/capi/guard.h"
#include "zero/capi/zero_engine.h"
#include "zero/model_state_formula.h"

namespace zero::capi {
namespace {

absl::Status Count(double value, const char* name) {
  if (std::isfinite(value) && value >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("%s is %g: a count of bytes or elements is finite and not negative", name,
                      value));
}

absl::StatusOr<ModelStateInput> Input(double psi, int ranks, int stage, double param_bytes,
                                      double grad_bytes, double optimizer_bytes, int offload,
                                      int nvme, int accumulation) {
  RETURN_IF_ERROR(Count(psi, "psi"));
  RETURN_IF_ERROR(Count(param_bytes, "param_bytes"));
  RETURN_IF_ERROR(Count(grad_bytes, "grad_bytes"));
  RETURN_IF_ERROR(Count(optimizer_bytes, "optimizer_bytes"));
  auto invalid = [](auto... args) { return absl::InvalidArgumentError(absl::StrFormat(args...)); };
  if (ranks < 1) return invalid("ranks is %d: at least 1", ranks);
  if (stage < 0 || stage > 3) return invalid("stage is %d: 0, 1, 2 or 3", stage);
  if (accumulation < 1) return invalid("accumulation is %d: at least 1", accumulation);
  if (offload != ZERO_OFFLOAD_NONE && offload != ZERO_OFFLOAD_OPTIMIZER &&
      offload != ZERO_OFFLOAD_PARAMETERS) {
    return invalid("offload code %d is not none (0), optimizer (1) or parameters (2)", offload);
  }
  if (offload == ZERO_OFFLOAD_PARAMETERS && stage != 3) {
    return invalid("parameter offload (offload %d) needs stage 3, not %d", offload, stage);
  }
  if (nvme != 0 && offload == ZERO_OFFLOAD_NONE) {
    return invalid("nvme needs offload (the optimizer state goes to the file from the host)");
  }
  return ModelStateInput{.psi = psi,
                         .ranks = ranks,
                         .stage = stage,
                         .param_bytes = param_bytes,
                         .grad_bytes = grad_bytes,
                         .optimizer_bytes = optimizer_bytes,
                         .offload_optimizer = offload != ZERO_OFFLOAD_NONE,
                         .offload_parameters = offload == ZERO_OFFLOAD_PARAMETERS,
                         .nvme = nvme != 0,
                         .accumulation = accumulation};
}

}  // namespace
}  // namespace zero::capi

extern "C" {

int zero_model_state_bytes(double psi, int ranks, int stage, double param_bytes,
                           double grad_bytes, double optimizer_bytes, int offload, int nvme,
                           int accumulation, double* device_bytes, double* host_bytes,
                           double* nvme_bytes) {
  return zero::capi::Guard([&]() -> absl::Status {
    ASSIGN_OR_RETURN(zero::ModelStateInput in,
                     zero::capi::Input(psi, ranks, stage, param_bytes, grad_bytes,
                                       optimizer_bytes, offload, nvme, accumulation));
    const zero::ModelStateBytes bytes = zero::ModelStateFormula(in);
    if (device_bytes != nullptr) *device_bytes = bytes.device();
    if (host_bytes != nullptr) *host_bytes = bytes.host;
    if (nvme_bytes != nullptr) *nvme_bytes = bytes.nvme;
    return absl::OkStatus();
  });
}

}  // extern "C"
