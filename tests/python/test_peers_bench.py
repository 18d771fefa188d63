"""The peers benchmark (bench/python/peers_bench.py) runs end to end on a
tiny model, so the script that gives the issue's figures cannot rot: every
framework trains, on the example GPT and on a transformers model, and with
the suite's unoptimized library it prints its tables and refuses the ratios
(and refuses to run at all without the flag). The breakdown's columns hold
what they say: zero's threads are named and do work, the peers' do not
exist, and only zero's rows have its calls."""

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


KINDS = ("ddp", "fsdp2", "zero2", "zero3")
BREAKDOWN = ("wall", "off-cpu", "main", "gloo", "z-stream", "z-comm", "z-cpu", "other",
             "add_grad", "gathers", "step")


def _tables(stdout):
    """The step table's rows and the breakdown's, by framework."""
    head, _, tail = stdout.partition("where the time goes")
    parse = lambda text: {line.split()[0]: line.split()[1:] for line in text.splitlines()  # noqa
                          if line.split() and line.split()[0] in KINDS}
    return parse(head), {k: dict(zip(BREAKDOWN, v)) for k, v in parse(tail).items()}


def _check_breakdown(breakdown, stdout):
    for kind, row in breakdown.items():
        assert float(row["wall"]) > 0 and float(row["main"]) > 0, (kind, stdout)
        if kind.startswith("zero"):
            # The engine's stream thread does the node's collectives or the
            # process group's; the main thread hands gradients over and steps.
            assert float(row["z-stream"]) + float(row["z-comm"]) > 0, (kind, stdout)
            assert float(row["add_grad"]) > 0 and float(row["step"]) > 0, (kind, stdout)
            assert (float(row["gathers"]) > 0) == (kind == "zero3"), (kind, stdout)
        else:
            assert float(row["gloo"]) > 0, (kind, stdout)
            # (an earlier round's engine may linger until collected, idle)
            assert float(row["z-stream"]) + float(row["z-cpu"]) <= 0.05 * float(row["main"]), \
                (kind, stdout)
            assert row["add_grad"] == row["gathers"] == row["step"] == "-", (kind, stdout)


def test_peers_bench_runs_every_framework():
    import zero
    optimized = zero.build_info()["optimized"]
    proc = _run([] if optimized else ["--allow_unoptimized"])
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    rows, breakdown = _tables(proc.stdout)
    assert set(rows) == set(KINDS) == set(breakdown), proc.stdout
    _check_breakdown(breakdown, proc.stdout)
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
    assert set(KINDS) <= kinds, many.stdout
    # A transformers model by its type: FSDP2 wraps its _no_split_modules,
    # zero gathers those blocks.
    hf = _run(["--model", "gpt2", "--frameworks", "fsdp2,zero3"] +
              ([] if optimized else ["--allow_unoptimized"]))
    assert hf.returncode == 0, hf.stdout + hf.stderr[-3000:]
    assert hf.stdout.startswith("gpt2, 2 processes"), hf.stdout
    rows, breakdown = _tables(hf.stdout)
    assert set(rows) == set(breakdown) == {"fsdp2", "zero3"}, hf.stdout
    _check_breakdown(breakdown, hf.stdout)
    assert int(rows["zero3"][4]) <= int(rows["fsdp2"][4]) * 1.01, hf.stdout
    if not optimized:
        refused = _run([])
        assert refused.returncode != 0
        assert "not an optimized build" in refused.stderr, refused.stderr[-2000:]
