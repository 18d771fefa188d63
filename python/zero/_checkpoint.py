"""Checkpoints and state dicts of a wrapped model.

- save_checkpoint / load_checkpoint: the engine's sharded checkpoints
  (zero/checkpoint/checkpoint.h): each rank writes what it owns (fp32
  masters, optimizer state, step count, loss scaler), and any number of
  processes at any stage loads them; blocking=False saves while training
  goes on (PendingCheckpoint.wait() publishes). Learning rates and schedulers are not
  in them (as DeepSpeed's client state): save the scheduler's state_dict
  yourself.
- state_dict: the model's own state_dict, consolidated (whole parameters
  under the model's names, tied names included, buffers and frozen
  parameters as they are), on rank 0; collective at stage 3.
- load_state_dict: a plain PyTorch state_dict into a wrapped model (every
  rank passes the same one); optimizer state is left as it is.
- consolidate / read_safetensors: a checkpoint's fp32 masters as one
  safetensors file, offline, and reading such a file without extra packages."""

import json
import os
import shutil
import struct
import threading

import torch

from . import _lib
from ._lib import ZeroError
from ._wrapped import gathered
from ._wrapped import state_of as _state


def save_checkpoint(model, root, blocking=True):
    """Collective, between steps: writes root/step-N/ and repoints
    root/latest; returns the folder written. On error `latest` still names
    the previous checkpoint.

    blocking=False returns a PendingCheckpoint as soon as the processes
    agree on the folder: training goes on while a thread copies this rank's
    state (the next optimizer step waits for that copy; forward and backward
    do not, except for offload_overlap's updates during backward) and the
    file is written in the background. Do not change parameters in place
    until the next step: at stages 0-2 in fp32 without offload they are the
    state being copied. With the state on NVMe, the copy is made before
    this returns. Its wait() publishes it; a later save_checkpoint waits
    for it first."""
    state = _state(model)
    state.check_between_steps("save_checkpoint")
    if state.pending_checkpoint is not None:
        state.pending_checkpoint.wait()
    if blocking:
        return state.engine.save(os.fspath(root))
    state.engine.save_start(os.fspath(root))
    state.pending_checkpoint = PendingCheckpoint(state)
    return state.pending_checkpoint


class PendingCheckpoint:
    """An asynchronous save_checkpoint in flight."""

    def __init__(self, state):
        self._state = state
        self._folder = None
        self._error = None

    def wait(self):
        """Collective: waits until every process's file is written, then
        publishes the checkpoint (repoints `latest`); returns its folder. On
        error (the same on every process) `latest` still names the previous
        checkpoint. Again after it returned: the same folder (or error)."""
        if self._folder is None and self._error is None:
            self._state.pending_checkpoint = None
            try:
                self._folder = self._state.engine.save_wait()
            except ZeroError as e:
                self._error = e
        if self._error is not None:
            raise self._error
        return self._folder


def keep_only(root, name, ignore_errors=False, background=False):
    """Every step folder of checkpoint root `root` but `name` goes (a root
    that holds the newest state only). With `background`, each is renamed
    out of the way at once (atomic: no reader sees it again) and deleted by
    a daemon thread, with any left so by a process that died first (freeing
    a snapshot's shared-memory pages took about 7 ms on the caller)."""
    doomed = []
    for entry in os.scandir(root):
        if entry.is_dir() and entry.name.startswith("step-") and entry.name != name:
            if not background:
                shutil.rmtree(entry.path, ignore_errors=ignore_errors)
                continue
            doomed.append(os.path.join(root, ".deleting-" + entry.name))
            os.rename(entry.path, doomed[-1])
    if background:
        doomed += [e.path for e in os.scandir(root) if e.name.startswith(".deleting-")
                   and e.path not in doomed]
    if doomed:
        threading.Thread(target=lambda: [shutil.rmtree(d, ignore_errors=True) for d in doomed],
                         daemon=True).start()


def load_checkpoint(model, path):
    """Collective: `path` is a root (its `latest`) or a step folder. On
    error the model and optimizer are as they were."""
    state = _state(model)
    state.check_between_steps("load_checkpoint")
    state.engine.load(os.fspath(path))


def state_dict(model):
    """The consolidated state_dict on rank 0 (None on the others)."""
    state = _state(model)
    rank0 = state.engine.rank == 0
    whole = {}
    for entries in gathered(state):
        if rank0:
            for e in entries:
                whole[id(e.param)] = e.param.data.detach().clone().view(e.shape)
    if not rank0:
        return None
    out = {}
    for name, tensor in _named_state(model):
        value = whole.get(id(tensor))
        out[name] = value if value is not None else tensor.detach().clone()
    return out


def _named_state(model):
    """(name, tensor) in model.state_dict()'s order, without reading the
    tensors (a stage-3 parameter is empty while released)."""
    out = []
    for prefix, module in model.named_modules(remove_duplicate=False):
        prefix = prefix + "." if prefix else ""
        for name, p in module._parameters.items():
            if p is not None:
                out.append((prefix + name, p))
        for name, b in module._buffers.items():
            if b is not None and name not in module._non_persistent_buffers_set:
                out.append((prefix + name, b))
    seen, unique = set(), []
    for name, t in out:
        if name not in seen:
            seen.add(name)
            unique.append((name, t))
    return unique


def named_state_keys(model):
    """The keys load_state_dict takes: parameters and persistent buffers."""
    return {n for n, _ in _named_state(model)}


def load_state_dict(model, values, strict=True):
    """Sets the wrapped model from a plain state_dict (same on every rank).
    Missing or unexpected keys (strict) and shape mismatches are errors
    naming them, raised before anything is changed."""
    state = _state(model)
    state.check_between_steps("load_state_dict")
    named = _named_state(model)
    names = {n for n, _ in named}
    if strict:
        missing = sorted(names - set(values))
        unexpected = sorted(set(values) - names)
        if missing or unexpected:
            raise ZeroError("load_state_dict: missing keys %s, unexpected keys %s"
                            % (missing, unexpected))
    plan = []
    for name, tensor in named:
        if name not in values:
            continue
        entry = state.by_param.get(id(tensor))
        shape = entry.shape if entry is not None else tuple(tensor.shape)
        if tuple(values[name].shape) != shape:
            raise ZeroError("load_state_dict: '%s' has shape %s, the model's is %s"
                            % (name, tuple(values[name].shape), shape))
        plan.append((entry, tensor, values[name]))
    with torch.no_grad():
        for entry, tensor, value in plan:
            if entry is not None:
                state.engine.set_param(entry.index, value)
            else:
                tensor.copy_(value)
    state.engine.order.after_engine()


def consolidate(checkpoint, output):
    """A checkpoint's fp32 master weights as one safetensors file (flat
    shapes), written atomically; needs no engine or process group."""
    rc = _lib.lib().zero_checkpoint_consolidate(os.fspath(checkpoint).encode(),
                                                os.fspath(output).encode())
    _lib.check(rc, "consolidating '%s'" % checkpoint)


_SAFETENSORS_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def read_safetensors(path):
    """{name: tensor} of a safetensors file (the dtypes consolidate writes)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ZeroError("'%s' is not a safetensors file (%d bytes)" % (path, len(data)))
    (length,) = struct.unpack("<Q", data[:8])
    if 8 + length > len(data):
        raise ZeroError("'%s': header of %d bytes beyond the file's %d" % (path, length,
                                                                         len(data)))
    header = json.loads(data[8:8 + length])
    body = memoryview(data)[8 + length:]
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES.get(meta["dtype"])
        begin, end = meta["data_offsets"]
        if dtype is None or not 0 <= begin <= end <= len(body):
            raise ZeroError("'%s': tensor '%s' has dtype %s, offsets %s"
                            % (path, name, meta["dtype"], meta["data_offsets"]))
        raw = bytearray(body[begin:end])
        flat = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        out[name] = flat.view(meta["shape"])
    return out


