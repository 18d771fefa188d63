"""Runs zero_worker.py under torchrun once per world size (module fixtures)
and hands its JSON results to the tests."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
# The suite runs the default (unoptimized) build on purpose: wrap's warning
# about it is for users (test_build_info checks it with this unset).
os.environ.setdefault("ZERO_ALLOW_UNOPTIMIZED", "1")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(world, script, args, timeout=900):
    """`script` (in this folder) under torchrun with `world` processes;
    fails the test with its stderr if it fails."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=%d" % world,
           "--master_addr=127.0.0.1", "--master_port=%d" % _free_port(),
           str(HERE / script)] + [str(a) for a in args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        pytest.fail("torchrun failed (%d):\n%s" % (proc.returncode, proc.stderr[-6000:]))
    return proc


def torchrun_nodes(nodes, per_node, script, args, timeout=900):
    """`script` as `nodes` torchrun launchers of `per_node` processes each on
    this machine, meeting at a c10d rendezvous (--nnodes), so torchrun sets
    LOCAL_WORLD_SIZE and the node ranks as on a cluster."""
    port = _free_port()
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=%d" % nodes,
           "--nproc_per_node=%d" % per_node, "--rdzv_backend=c10d",
           "--rdzv_endpoint=127.0.0.1:%d" % port, "--rdzv_id=zero-test-%d" % port,
           str(HERE / script)] + [str(a) for a in args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    launchers = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for _ in range(nodes)]
    failures = []
    for proc in launchers:
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for p in launchers:
                p.kill()
            pytest.fail("torchrun --nnodes=%d timed out" % nodes)
        if proc.returncode != 0:
            failures.append("launcher failed (%d):\n%s" % (proc.returncode, err[-4000:]))
    if failures:
        pytest.fail("\n".join(failures))


def launch_ranks(world, script, args, timeout, env=None):
    """`world` processes of `script` started as torchrun would start them
    (its environment variables, plus `env`), without torchrun's agent (which
    would stop the others when one dies): returns each one's (return code,
    stderr), or fails if any is still running after `timeout` seconds."""
    import time

    base = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()),
                WORLD_SIZE=str(world), OMP_NUM_THREADS="1", **(env or {}))
    procs = [subprocess.Popen([sys.executable, str(HERE / script)] + [str(a) for a in args],
                              env=dict(base, RANK=str(r), LOCAL_RANK=str(r)),
                              stderr=subprocess.PIPE, text=True) for r in range(world)]
    deadline = time.monotonic() + timeout
    out = []
    for p in procs:
        try:
            _, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("a process still runs after %d s (a hang)" % timeout)
        out.append((p.returncode, err))
    return out


def run_torchrun(tmp_path, world, cases, steps):
    cases_file, out = tmp_path / "cases.json", tmp_path / "results.json"
    cases_file.write_text(json.dumps(cases))
    torchrun(world, "zero_worker.py",
             ["--cases", cases_file, "--out", out, "--steps", steps])
    return json.loads(out.read_text())
