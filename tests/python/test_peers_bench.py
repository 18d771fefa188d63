"""The peers benchmark (bench/python/peers_bench.py) runs end to end on a
tiny model, so the script that gives the issue's figures cannot rot: every
framework trains, and with the suite's unoptimized library it prints its
table and refuses the ratios (and refuses to run at all without the flag)."""

import os
import subprocess
import sys
from pathlib import Path

from conftest import _free_port

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--dim", "32", "--heads", "2", "--layers", "2", "--vocab", "64", "--seq", "8",
        "--rows", "2", "--steps", "2", "--warmup", "1", "--rounds", "2"]


def _run(extra):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
           "--master_addr=127.0.0.1", "--master_port=%d" % _free_port(),
           str(ROOT / "bench" / "python" / "peers_bench.py")] + TINY + extra
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))


def test_peers_bench_runs_every_framework():
    import zero
    optimized = zero.build_info()["optimized"]
    proc = _run([] if optimized else ["--allow_unoptimized"])
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    rows = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines()
            if line.split() and line.split()[0] in ("ddp", "fsdp2", "zero2", "zero3")}
    assert set(rows) == {"ddp", "fsdp2", "zero2", "zero3"}, proc.stdout
    for kind, (ms, forward, backward, step, persistent, peak) in rows.items():
        assert float(ms) > 0 and 0 < int(persistent) <= int(peak), (kind, proc.stdout)
        # Each phase is its own median: together about the step, never above it by much.
        phases = [float(forward), float(backward), float(step)]
        assert all(p > 0 for p in phases) and min(phases) <= float(ms), (kind, proc.stdout)
    # Sharding shows in the bytes even on a tiny model.
    assert int(rows["zero3"][4]) < int(rows["zero2"][4]) < int(rows["ddp"][4]), proc.stdout
    assert ("zero3/fsdp2: step time" in proc.stdout) == optimized, proc.stdout
    many = _run(["--many_params", "40"] + ([] if optimized else ["--allow_unoptimized"]))
    assert many.returncode == 0, many.stdout + many.stderr[-3000:]
    kinds = {line.split()[0] for line in many.stdout.splitlines() if line.split()}
    assert {"ddp", "fsdp2", "zero2", "zero3"} <= kinds, many.stdout
    if not optimized:
        refused = _run([])
        assert refused.returncode != 0
        assert "not an optimized build" in refused.stderr, refused.stderr[-2000:]
