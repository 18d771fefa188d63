"""libzero_engine.so through ctypes: finding it, the C signatures of
zero/capi/zero_engine.h, and turning a non-zero status into ZeroError.

The library is looked for, in order: $ZERO_ENGINE_LIB; next to this file
(a wheel that ships it); the repository's bazel-bin (a source checkout after
`bazel build -c opt //zero/capi:zero_engine`). Loaded once per process."""

import ctypes
import json
import os
import warnings
from pathlib import Path

import torch

F16, F32, BF16 = 6, 7, 9  # NCCL's dtype codes, as the C ABI uses them
SUM, MAX, AVG = 0, 2, 4

TORCH_DTYPE = {F16: torch.float16, F32: torch.float32, BF16: torch.bfloat16}
CODE_OF = {v: k for k, v in TORCH_DTYPE.items()}


class ZeroError(RuntimeError):
    """An error from the engine or from zero.wrap's checks of its input."""


class _Sized(ctypes.Structure):
    """A struct the caller fills: its first field, size, is set to its
    sizeof here, as zero_engine.h asks (the library checks it)."""

    def __init__(self, *args, **kwargs):
        super().__init__(ctypes.sizeof(type(self)), *args, **kwargs)


class ParamSpec(_Sized):
    _fields_ = [("size", ctypes.c_size_t), ("name", ctypes.c_char_p),
                ("numel", ctypes.c_size_t), ("module", ctypes.c_int), ("group", ctypes.c_int)]


_p, _i, _sz, _d = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_double
ALL_GATHER = ctypes.CFUNCTYPE(_i, _p, _p, _sz, _i, _p, _p)
REDUCE = ctypes.CFUNCTYPE(_i, _p, _p, _sz, _i, _i, _p, _p)  # reduce_scatter, all_reduce
BROADCAST = ctypes.CFUNCTYPE(_i, _p, _p, _sz, _i, _i, _p, _p)
BARRIER = ctypes.CFUNCTYPE(_i, _p, _p)
ABORT = ctypes.CFUNCTYPE(None, ctypes.c_char_p, _p)


class Collectives(_Sized):
    _fields_ = [("size", _sz), ("all_gather", ALL_GATHER), ("reduce_scatter", REDUCE),
                ("all_reduce", REDUCE), ("broadcast", BROADCAST),
                ("barrier", BARRIER), ("abort", ABORT), ("user", _p)]


_SIGNATURES = {
    "zero_devices_create": [ctypes.POINTER(_p), ctypes.c_char_p],
    "zero_devices_destroy": [_p],
    "zero_comm_create_local": [ctypes.POINTER(_p), _i, _d, _p],
    "zero_comm_create": [ctypes.POINTER(_p), _i, _i, ctypes.POINTER(Collectives)],
    "zero_comm_destroy": [_p],
    "zero_engine_create": [ctypes.POINTER(_p), ctypes.c_char_p, ctypes.POINTER(ParamSpec),
                           _i, _p, _p, _i],
    "zero_engine_destroy": [_p],
    "zero_engine_param": [_p, _i, ctypes.POINTER(_p), ctypes.POINTER(_sz),
                          ctypes.POINTER(_i)],
    "zero_engine_set_param": [_p, _i, _p, _sz],
    "zero_engine_fetch": [_p, _i],
    "zero_engine_release": [_p, _i],
    "zero_engine_add_grad": [_p, _i, _p, _sz, _i],
    "zero_engine_step": [_p],
    "zero_engine_zero_grad": [_p],
    "zero_engine_set_lr": [_p, _i, _d],
    "zero_engine_loss_scale": [_p, ctypes.POINTER(_d)],
    "zero_engine_stream": [_p, ctypes.POINTER(_p)],
    "zero_engine_synchronize": [_p],
    "zero_engine_stats_json": [_p, ctypes.c_char_p, _sz, ctypes.POINTER(_sz)],
    "zero_engine_save": [_p, ctypes.c_char_p, ctypes.c_char_p, _sz, ctypes.POINTER(_sz)],
    "zero_engine_save_start": [_p, ctypes.c_char_p],
    "zero_engine_save_wait": [_p, ctypes.c_char_p, _sz, ctypes.POINTER(_sz)],
    "zero_engine_load": [_p, ctypes.c_char_p],
    "zero_checkpoint_consolidate": [ctypes.c_char_p, ctypes.c_char_p],
}

_lib = None


def _candidates():
    if os.environ.get("ZERO_ENGINE_LIB"):
        return [Path(os.environ["ZERO_ENGINE_LIB"])]
    here = Path(__file__).resolve().parent
    return [here / "libzero_engine.so",
            here.parent.parent / "bazel-bin" / "zero" / "capi" / "libzero_engine.so"]


def lib():
    """The loaded library (ZeroError naming where it looked if absent)."""
    global _lib
    if _lib is None:
        paths = _candidates()
        found = next((p for p in paths if p.is_file()), None)
        if found is None:
            raise ZeroError(
                "libzero_engine.so not found (looked at %s): run `bazel build -c opt "
                "//zero/capi:zero_engine` or set ZERO_ENGINE_LIB" % ", ".join(map(str, paths)))
        loaded = ctypes.CDLL(str(found))
        for name, args in _SIGNATURES.items():
            fn = getattr(loaded, name)
            fn.argtypes, fn.restype = args, _i
        loaded.zero_engine_last_error.restype = ctypes.c_char_p
        loaded.zero_engine_last_error.argtypes = []
        loaded.zero_comm_set_error.restype = None
        loaded.zero_comm_set_error.argtypes = [ctypes.c_char_p]
        loaded.zero_engine_build_info.restype = ctypes.c_char_p
        loaded.zero_engine_build_info.argtypes = []
        loaded.path = found
        _lib = loaded
    return _lib


def build_info():
    """How the loaded library was built: {"optimized": bool, "assertions":
    bool, "path": str}."""
    info = json.loads(lib().zero_engine_build_info().decode())
    info["path"] = str(lib().path)
    return info


_warned_unoptimized = False


def warn_if_unoptimized():
    """Once per process: a library built without optimization (Bazel's
    default) trains correctly but steps the optimizer about ten times
    slower, which a user would otherwise only see as a slow run."""
    global _warned_unoptimized
    if _warned_unoptimized or os.environ.get("ZERO_ALLOW_UNOPTIMIZED"):
        return
    _warned_unoptimized = True
    info = build_info()
    if not info["optimized"]:
        warnings.warn("%s was built without optimization (Bazel's default): correct, but its "
                      "optimizer steps and copies run about ten times slower; build it with "
                      "`bazel build -c opt //zero/capi:zero_engine` (ZERO_ALLOW_UNOPTIMIZED=1 "
                      "silences this)" % info["path"], RuntimeWarning, stacklevel=3)


def check(rc, what):
    """Raises ZeroError with the library's text when rc != 0."""
    if rc != 0:
        text = lib().zero_engine_last_error().decode(errors="replace")
        raise ZeroError("%s failed: %s" % (what, text))
