"""zero.memory_summary: this rank's engine statistics, and its model-state
bytes on the device beside the ZeRO paper's formula for the same setup.

The formula is the library's (zero_model_state_bytes, over
zero/model_state_formula.h: the one the footprint experiment prints too).
With Ψ parameters (padded as the layout pads them), N processes, P bytes
per parameter and G per gradient in the model dtype, and K bytes of
optimizer state per parameter (Adam 8, SGD with momentum 4, plus 4 for fp32
master weights in bf16/fp16), the device holds
    stage 0: (P + G + K) Ψ          stage 1: (P + G) Ψ + K Ψ / N
    stage 2: P Ψ + (G + K) Ψ / N    stage 3: (P + G + K) Ψ / N
so bf16 Adam at stage 3 is 16Ψ/N. Stage 1 with gradient accumulation adds
G Ψ / N: the micro-batches' reduced shards accumulate in a buffer of their
own while the whole gradient buffer takes the next micro-batch (DeepSpeed's
stage 1 holds the same fp32 partition at the boundary). Optimizer offload
moves the K (and, from stage 2, the G) share to pinned host memory;
parameter offload the P share too. Stage 3's gathered parameters and the
reduction buckets are transient and reported apart ("gathered",
"communication")."""

import ctypes

from . import _lib
from ._lib import ZeroError
from ._wrapped import state_of

_MODEL_STATE_TAGS = ("parameters", "gradients", "optimizer_state")
_OFFLOAD = {"none": _lib.OFFLOAD_NONE, "optimizer": _lib.OFFLOAD_OPTIMIZER,
            "parameters": _lib.OFFLOAD_PARAMETERS}


def _optimizer_bytes(state):
    cfg = state.optimizer_cfg
    if cfg["type"] in ("adam", "adamw"):
        k = 8
    else:
        k = 4 if any(g.get("momentum", 0) for g in cfg["groups"]) else 0
    mixed = state.dtype.itemsize < 4
    return k + (4 if mixed else 0)


def model_state_formula(stage, psi, world, p, g, k, offload="none", accumulation=1):
    """Device bytes per rank of parameters + gradients + optimizer state
    (ZeroError for arguments the formula does not take)."""
    code = _OFFLOAD.get(offload)
    if code is None:
        raise ZeroError("offload '%s' is not one of %s" % (offload, ", ".join(_OFFLOAD)))
    device = ctypes.c_double()
    _lib.check(_lib.lib().zero_model_state_bytes(float(psi), int(world), int(stage), float(p),
                                                 float(g), float(k), code, 0, int(accumulation),
                                                 ctypes.byref(device), None, None),
               "the model state formula")
    return device.value


def summary(model):
    state = state_of(model)
    stats = state.engine.stats()
    tags = stats["pool"]["tags"]
    p = state.dtype.itemsize
    k = _optimizer_bytes(state)
    offload = state.offload
    formula = model_state_formula(stats["stage"], stats["padded_numel"], stats["world_size"],
                                  p, p, k, offload, state.accumulation)
    stats["model_states"] = {
        "device_bytes": sum(tags[t]["current"] for t in _MODEL_STATE_TAGS),
        "formula_bytes": int(formula),
        "bytes_per_parameter": {"P": p, "G": p, "K": k},
        "offload": offload,
    }
    return stats
