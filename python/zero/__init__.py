"""zero: ZeRO stages 0-3 for an existing PyTorch model and optimizer.

    model, optimizer = zero.wrap(model, optimizer, {"zero_optimization": {"stage": 2}})
    for batch in data:                 # the loop stays a PyTorch loop
        loss = model(batch).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

Run one process per device (torchrun); the engine's collectives go through
the torch.distributed process group the program has (gloo on CPU). The
config is a dict or a JSON file in DeepSpeed's keys (see _config.py). With
gradient_accumulation_steps = k, call optimizer.step() after k backward
passes and do not divide the loss by k: the engine averages.

Checkpoints (_checkpoint.py): save_checkpoint / load_checkpoint (sharded,
any process count in and out; blocking=False saves while training goes
on), state_dict / load_state_dict (the model's own
keys, whole), consolidate (fp32 masters to safetensors). memory_summary
(_memory.py): this rank's pool and its model-state bytes beside the ZeRO
formula. time_summary (_timing.py): this rank's time in the engine's calls.
build_info(): whether the loaded library is an optimized build
(`bazel build -c opt //zero/capi:zero_engine`; wrap warns once if not)."""

from ._checkpoint import (PendingCheckpoint, consolidate, load_checkpoint, load_state_dict,
                          read_safetensors, save_checkpoint, state_dict)
from ._lib import ZeroError, build_info
from ._memory import model_state_formula
from ._memory import summary as memory_summary
from ._optim_state import merge_state_dicts as merge_optimizer_state_dicts
from ._timing import summary as time_summary
from ._wrap import ZeroOptimizer, full_parameters, on_resume, resumed_step, wrap

__all__ = ["wrap", "ZeroError", "ZeroOptimizer", "full_parameters", "memory_summary",
           "model_state_formula", "save_checkpoint", "load_checkpoint", "state_dict",
           "load_state_dict", "consolidate", "read_safetensors", "build_info",
           "PendingCheckpoint", "merge_optimizer_state_dicts", "resumed_step", "on_resume",
           "time_summary"]
