"""libzero_engine.so through ctypes: finding it, checking its ABI version,
the C signatures of zero/capi/zero_engine.h, and turning a non-zero status
into ZeroError.

The library is looked for, in order: $ZERO_ENGINE_LIB; next to this file
(a wheel that ships it); the repository's bazel-bin (a source checkout after
`bazel build -c opt //zero/capi:zero_engine`). Loaded once per process.

The tables below restate the header for ctypes; tests/python/test_abi.py
parses zero_engine.h and fails on any difference (a function, an argument,
a return type, a struct field, a constant)."""

import ctypes
import json
import os
import warnings
from pathlib import Path

import torch

# zero_engine.h's ZERO_ABI_VERSION_MAJOR, _MINOR that these tables follow: a
# library of another major, or an older minor, is refused when loaded.
ABI_VERSION = (1, 5)

F16, F32, BF16 = 6, 7, 9  # NCCL's dtype codes, as the C ABI uses them
SUM, MAX, AVG = 0, 2, 4
OFFLOAD_NONE, OFFLOAD_OPTIMIZER, OFFLOAD_PARAMETERS = 0, 1, 2

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
_s = ctypes.c_char_p
ALL_GATHER = ctypes.CFUNCTYPE(_i, _p, _p, _sz, _i, _p, _p)
REDUCE = ctypes.CFUNCTYPE(_i, _p, _p, _sz, _i, _i, _p, _p)  # reduce_scatter, all_reduce
BROADCAST = ctypes.CFUNCTYPE(_i, _p, _p, _sz, _i, _i, _p, _p)
BARRIER = ctypes.CFUNCTYPE(_i, _p, _p)
ABORT = ctypes.CFUNCTYPE(None, _s, _p)


class Collectives(_Sized):
    _fields_ = [("size", _sz), ("all_gather", ALL_GATHER), ("reduce_scatter", REDUCE),
                ("all_reduce", REDUCE), ("broadcast", BROADCAST),
                ("barrier", BARRIER), ("abort", ABORT), ("user", _p),
                ("all_to_all", ALL_GATHER)]  # the same signature


def _out(t):
    return ctypes.POINTER(t)


# name: (return type, argument types), in the header's order.
SIGNATURES = {
    "zero_engine_abi_version": (_i, [_out(_i), _out(_i)]),
    "zero_engine_last_error": (_s, []),
    "zero_engine_build_info": (_s, []),
    "zero_devices_create": (_i, [_out(_p), _s]),
    "zero_devices_count": (_i, [_p, _out(_i)]),
    "zero_devices_destroy": (_i, [_p]),
    "zero_comm_create_local": (_i, [_out(_p), _i, _d, _p]),
    "zero_comm_create": (_i, [_out(_p), _i, _i, _out(Collectives)]),
    "zero_comm_create_hierarchical": (_i, [_out(_p), _i, _i, _p, _p, _p, _i]),
    "zero_comm_set_error": (None, [_s]),
    "zero_reduce_in_rank_order": (_i, [_p, _i, _sz, _i, _i, _p]),
    "zero_comm_destroy": (_i, [_p]),
    "zero_devices_create_node": (_i, [_out(_p), _s, _i, _i, _s, _d]),
    "zero_comm_create_node": (_i, [_out(_p), _p, _d]),
    "zero_devices_node_info": (_i, [_p, _s, _sz, _out(_sz)]),
    "zero_devices_allocate": (_i, [_p, _i, _sz, _out(_p)]),
    "zero_devices_free": (_i, [_p, _i, _p, _sz]),
    "zero_comm_all_gather": (_i, [_p, _p, _p, _sz, _i]),
    "zero_comm_reduce_scatter": (_i, [_p, _p, _p, _sz, _i, _i]),
    "zero_comm_all_reduce": (_i, [_p, _p, _p, _sz, _i, _i]),
    "zero_engine_create": (_i, [_out(_p), _s, _out(ParamSpec), _i, _p, _p, _i]),
    "zero_engine_destroy": (_i, [_p]),
    "zero_engine_param": (_i, [_p, _i, _out(_p), _out(_sz), _out(_i)]),
    "zero_engine_set_param": (_i, [_p, _i, _p, _sz]),
    "zero_engine_fetch": (_i, [_p, _i]),
    "zero_engine_release": (_i, [_p, _i]),
    "zero_engine_wait_fetched": (_i, [_p, _i]),
    "zero_engine_add_grad": (_i, [_p, _i, _p, _sz, _i]),
    "zero_engine_step": (_i, [_p]),
    "zero_engine_zero_grad": (_i, [_p]),
    "zero_engine_stream": (_i, [_p, _out(_p)]),
    "zero_engine_synchronize": (_i, [_p]),
    "zero_engine_set_lr": (_i, [_p, _i, _d]),
    "zero_engine_loss_scale": (_i, [_p, _out(_d)]),
    "zero_engine_stats_json": (_i, [_p, _s, _sz, _out(_sz)]),
    "zero_engine_owned_piece": (_i, [_p, _i, _out(_sz), _out(_sz), _out(_i)]),
    "zero_engine_owned_read": (_i, [_p, _i, _i, _sz, _sz, _p]),
    "zero_engine_owned_write": (_i, [_p, _i, _i, _sz, _sz, _p]),
    "zero_engine_restore": (_i, [_p, ctypes.c_int64]),
    "zero_engine_save": (_i, [_p, _s, _s, _sz, _out(_sz)]),
    "zero_engine_save_start": (_i, [_p, _s]),
    "zero_engine_snapshot_start": (_i, [_p, _s]),
    "zero_engine_save_wait": (_i, [_p, _s, _sz, _out(_sz)]),
    "zero_engine_load": (_i, [_p, _s]),
    "zero_checkpoint_consolidate": (_i, [_s, _s]),
    "zero_model_state_bytes": (_i, [_d, _i, _i, _d, _d, _d, _i, _i, _i, _out(_d), _out(_d),
                                    _out(_d)]),
}

_lib = None


def _candidates():
    if os.environ.get("ZERO_ENGINE_LIB"):
        return [Path(os.environ["ZERO_ENGINE_LIB"])]
    here = Path(__file__).resolve().parent
    return [here / "libzero_engine.so",
            here.parent.parent / "bazel-bin" / "zero" / "capi" / "libzero_engine.so"]


def _abi_version(loaded):
    """(major, minor) of a loaded library; None when it has no version
    query (it predates zero_engine_abi_version)."""
    query = getattr(loaded, "zero_engine_abi_version", None)
    if query is None:
        return None
    restype, argtypes = SIGNATURES["zero_engine_abi_version"]
    query.restype, query.argtypes = restype, argtypes
    major, minor = ctypes.c_int(), ctypes.c_int()
    if query(ctypes.byref(major), ctypes.byref(minor)) != 0:
        return None
    return major.value, minor.value


def check_abi_version(version, path):
    """ZeroError unless `version` (the library's, or None) has our major
    and at least our minor: another major changed what these tables say;
    an older minor lacks what this package calls."""
    if version is not None and version[0] == ABI_VERSION[0] and version[1] >= ABI_VERSION[1]:
        return
    found = "C ABI %d.%d" % version if version is not None else "no ABI version (an older build)"
    raise ZeroError(
        "%s has %s, but this zero package needs C ABI %d.%d (the same major, at least its "
        "minor): rebuild the library from the same checkout as the package (`bazel build -c opt "
        "//zero/capi:zero_engine`) or point ZERO_ENGINE_LIB at a matching one"
        % (path, found, ABI_VERSION[0], ABI_VERSION[1]))


def lib():
    """The loaded library (ZeroError naming where it looked if absent, or
    naming both versions if its ABI is not this package's)."""
    global _lib
    if _lib is None:
        paths = _candidates()
        found = next((p for p in paths if p.is_file()), None)
        if found is None:
            raise ZeroError(
                "libzero_engine.so not found (looked at %s): run `bazel build -c opt "
                "//zero/capi:zero_engine` or set ZERO_ENGINE_LIB" % ", ".join(map(str, paths)))
        loaded = ctypes.CDLL(str(found))
        check_abi_version(_abi_version(loaded), found)
        for name, (restype, argtypes) in SIGNATURES.items():
            fn = getattr(loaded, name)
            fn.restype, fn.argtypes = restype, argtypes
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
