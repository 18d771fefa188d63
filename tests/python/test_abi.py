"""The C ABI as the package sees it: _lib.py's ctypes tables against
zero/capi/zero_engine.h (and altered copies of it, to show each kind of
difference fails the check), the ABI version check when the library loads,
the struct sizes it fills in, and the model-state formula it calls."""

import ctypes
from pathlib import Path

import pytest

import zero
from zero import _lib

import c_header

HEADER = Path(__file__).resolve().parents[2] / "zero" / "capi" / "zero_engine.h"


def test_lib_tables_match_the_header():
    assert c_header.differences(HEADER.read_text(), _lib) == []


# (what the header says, what an altered copy says instead, what the check must say)
_ALTERATIONS = [
    ("int zero_engine_step(zero_engine_t engine);",
     "int zero_engine_step(zero_engine_t engine, int flags);",
     "zero_engine_step: the header has 2 arguments (zero_engine_t, int), _lib.py 1"),
    ("const float* values, size_t numel);", "const float* values, int numel);",
     "zero_engine_set_param argument 4: the header has 'int' (c_int), _lib.py c_ulong"),
    ("int zero_engine_destroy(zero_engine_t engine);",
     "void zero_engine_destroy(zero_engine_t engine);",
     "zero_engine_destroy returns: the header has 'void' (void), _lib.py c_int"),
    ("int zero_engine_zero_grad(zero_engine_t engine);", "",
     "zero_engine_zero_grad is in _lib.SIGNATURES but not in the header"),
    ("int zero_engine_step(zero_engine_t engine);",
     "int zero_engine_step(zero_engine_t engine);\nint zero_engine_pause(zero_engine_t engine);",
     "zero_engine_pause is in the header but not in _lib.SIGNATURES"),
    ("int zero_engine_set_lr(zero_engine_t engine, int group, double lr);",
     "int zero_engine_set_lr(zero_engine_t engine, int group, float lr);",
     "zero_engine_set_lr argument 3: no ctypes type is known for the C type 'float'"),
    ("  int group;", "  int group;\n  int priority;",
     "struct zero_param_spec: the header's fields are ['size', 'name', 'numel', 'module', "
     "'group', 'priority']"),
    ("  size_t numel;\n", "  int numel;\n",
     "struct zero_param_spec.numel: the header has 'int' (c_int), _lib.py c_ulong"),
    ("int (*barrier)(void* user, void* stream);",
     "int (*barrier)(void* user, void* stream, int timeout);",
     "struct zero_collectives.barrier: the header has 3 arguments"),
    ("ZERO_BF16 = 9", "ZERO_BF16 = 10", "ZERO_BF16 is 10 in the header, _lib.BF16 9"),
    ("#define ZERO_ABI_VERSION_MAJOR 1", "#define ZERO_ABI_VERSION_MAJOR 2",
     "the header is ABI 2.5, _lib.ABI_VERSION (1, 5)"),
    ("int zero_engine_step(zero_engine_t engine);", "int zero_engine_step[2];",
     "the header cannot be read"),
]


@pytest.mark.parametrize("old,new,said", _ALTERATIONS, ids=[a[2][:40] for a in _ALTERATIONS])
def test_a_header_that_differs_fails_the_check(old, new, said):
    text = HEADER.read_text()
    assert text.count(old) == 1, "the alteration no longer applies: %r" % old
    found = c_header.differences(text.replace(old, new), _lib)
    assert any(said in line for line in found), found


def test_a_library_of_another_abi_is_refused(monkeypatch):
    major, minor = _lib.ABI_VERSION
    monkeypatch.setattr(_lib, "_lib", None)  # load again
    monkeypatch.setattr(_lib, "_abi_version", lambda loaded: (major + 1, 0))
    with pytest.raises(_lib.ZeroError, match=r"has C ABI %d\.0, but this zero package needs C "
                                             r"ABI %d\.%d" % (major + 1, major, minor)):
        _lib.lib()
    monkeypatch.setattr(_lib, "_abi_version", lambda loaded: None)
    with pytest.raises(_lib.ZeroError, match="no ABI version"):
        _lib.lib()
    assert _lib._lib is None


def test_an_older_minor_is_refused_and_a_newer_one_taken(monkeypatch):
    monkeypatch.setattr(_lib, "ABI_VERSION", (1, 4))
    with pytest.raises(_lib.ZeroError, match=r"C ABI 1\.3, but this zero package needs C ABI 1\.4"):
        _lib.check_abi_version((1, 3), "lib.so")
    _lib.check_abi_version((1, 5), "lib.so")
    _lib.check_abi_version((1, 4), "lib.so")


def test_the_built_library_is_this_packages_abi():
    assert _lib._abi_version(_lib.lib()) == _lib.ABI_VERSION


def test_structs_carry_their_size():
    spec = _lib.ParamSpec(b"w", 10, 0, 1)
    assert spec.size == ctypes.sizeof(_lib.ParamSpec)
    assert (spec.name, spec.numel, spec.group) == (b"w", 10, 1)
    assert _lib.Collectives().size == ctypes.sizeof(_lib.Collectives)


def test_the_formula_is_the_librarys():
    assert zero.model_state_formula(3, 1 << 20, 4, 2, 2, 12) == 16 * (1 << 20) / 4
    # Offload keeps only the parameters (and below stage 2 the gradient) on the device.
    assert zero.model_state_formula(2, 1024, 2, 2, 2, 12, "optimizer") == 2 * 1024
    assert zero.model_state_formula(1, 1024, 2, 4, 4, 8, accumulation=2) == (8 + 4 / 2 + 8 / 2) * 1024


@pytest.mark.parametrize("args,kwargs,said", [
    ((5, 1024, 2, 2, 2, 12), {}, "stage is 5"),
    ((3, 1024, 0, 2, 2, 12), {}, "ranks is 0"),
    ((3, -1, 2, 2, 2, 12), {}, "psi is -1"),
    ((2, 1024, 2, 2, 2, 12), {"offload": "parameters"}, "parameter offload"),
    ((3, 1024, 2, 2, 2, 12), {"offload": "disk"}, "offload 'disk' is not one of"),
])
def test_the_formula_refuses_bad_input(args, kwargs, said):
    with pytest.raises(zero.ZeroError, match=said):
        zero.model_state_formula(*args, **kwargs)
