"""python/build_wheel.sh's wheel, installed with pip into a fresh virtual
environment, trains: the example runs under torchrun from the installed
package, which loads the library inside the wheel (and the libraries the
wheel carries beside it) with no environment variable pointing anywhere.

The wheel packages the library the rest of the suite loads (--lib: no
second, optimized build here). The fresh environment gets PyPI's torch from
the suite's own environment through a .pth line (a plain path: the .pth
files there, such as the one that puts this checkout's python/ on the path,
are not read), since installing torch would need the network; the wheel
itself goes in with pip, without its dependencies."""

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import _free_port

ROOT = Path(__file__).resolve().parents[2]
PLATFORM = "manylinux_2_34_x86_64"

# Run inside the fresh environment: where zero and its library come from,
# and every file of the library's own that the process mapped.
PROBE = r"""
import json, zero, zero._lib as L
lib = L.lib()
mapped = sorted({line.split()[-1] for line in open("/proc/self/maps")
                 if "/" in line and ("libabsl_" in line or "libzero_engine" in line)})
print(json.dumps({"zero": zero.__file__, "lib": str(lib.path), "mapped": mapped,
                  "info": json.loads(lib.zero_engine_build_info().decode())}))
"""


def _suite_library():
    """The library the other tests load: $ZERO_ENGINE_LIB (test.sh sets it)
    or the first that zero._lib's search finds."""
    from zero import _lib
    found = next((p for p in _lib._candidates() if p.is_file()), None)
    if found is None:
        pytest.fail("no libzero_engine.so to package (looked at %s): run `bazel build "
                    "//zero/capi:zero_engine` or set ZERO_ENGINE_LIB"
                    % ", ".join(map(str, _lib._candidates())))
    return found


def _run(cmd, timeout, **kwargs):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          timeout=timeout, **kwargs)
    if proc.returncode != 0:
        pytest.fail("%s failed (%d):\n%s\n%s" % (" ".join(map(str, cmd[:4])), proc.returncode,
                                                 proc.stdout[-3000:], proc.stderr[-6000:]))
    return proc


def test_installed_wheel_trains_under_torchrun(tmp_path):
    # The wheel, from the suite's library.
    dist = tmp_path / "dist"
    _run(["bash", ROOT / "python" / "build_wheel.sh", "--lib", _suite_library(),
          "--out", dist, "--python", sys.executable], timeout=180)
    wheels = sorted(dist.glob("*.whl"))
    assert len(wheels) == 1, wheels
    wheel = wheels[0]
    assert wheel.name.endswith("-py3-none-%s.whl" % PLATFORM), wheel.name

    # A fresh environment (no pip of its own: the suite's pip installs into
    # it), torch reachable through a plain path line.
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], timeout=120)
    python = venv / "bin" / "python"
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     timeout=60).stdout.strip())
    (site / "suite-torch.pth").write_text(str(Path(torch.__file__).resolve().parents[1]) + "\n")
    _run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-index",
          "--no-deps", wheel], timeout=120)

    # Outside the checkout (no python/ or zero/ folder on the path), with
    # nothing that names a library or a package path.
    env = {k: v for k, v in os.environ.items()
           if k not in ("ZERO_ENGINE_LIB", "PYTHONPATH", "PYTHONHOME", "LD_LIBRARY_PATH")}
    env["OMP_NUM_THREADS"] = "1"
    work = tmp_path / "work"
    work.mkdir()

    probe = json.loads(_run([python, "-c", PROBE], timeout=120, cwd=work, env=env).stdout)
    package = site / "zero"
    assert Path(probe["zero"]).resolve() == (package / "__init__.py").resolve(), probe
    assert Path(probe["lib"]).resolve() == (package / "libzero_engine.so").resolve(), probe
    # Every abseil library comes from the wheel's .libs/, not the system's
    # (which this machine has too): the library's RPATH found them.
    absl = [m for m in probe["mapped"] if "libabsl_" in m]
    assert absl, probe["mapped"]
    outside = [m for m in probe["mapped"]
               if not Path(m).resolve().is_relative_to(package.resolve())]
    assert not outside, "mapped from outside the installed package: %s" % outside

    # The example, from the installed package, two ranks, three steps.
    cmd = [python, "-m", "torch.distributed.run", "--nproc_per_node=2",
           "--master_addr=127.0.0.1", "--master_port=%d" % _free_port(),
           "-m", "zero.examples.gpt", "--stage", "3", "--steps", "3"]
    proc = _run(cmd, timeout=300, cwd=work, env=env)
    losses = {int(step): float(loss)
              for step, loss in re.findall(r"^step (\d+) loss (\S+)$", proc.stdout, re.M)}
    assert sorted(losses) == [0, 1, 2], proc.stdout + proc.stderr[-3000:]
    # Training ran: finite losses that fall (the tied embedding's large
    # initial logits put step 0 near 22, step 2 near 17).
    assert all(math.isfinite(v) for v in losses.values()), losses
    assert losses[2] < losses[0] - 1, losses
