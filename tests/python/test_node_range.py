"""Issue 43 under torchrun on one machine (one node): the node's processes
share one address range (memory/node_range.h) and the engine's collectives
read peers' memory in place (zero/comm/node_communicator.h). Training
gives the bits of the process-group path at every stage, each process's
memory is reported in the range, a killed process is an error naming it on
the others, and nothing is left in /dev/shm."""

import os

import pytest
from conftest import launch_ranks, run_torchrun

STEPS = 4
_S3 = {"stage": 3, "stage3_param_persistence_threshold": 0, "stage3_prefetch_bucket_size": 0}


def _dev_shm():
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


@pytest.mark.parametrize("world", [2, 4])
def test_the_range_trains_bit_for_bit_like_the_process_group(tmp_path, world):
    before = _dev_shm()
    cases = {
        "gloo_stage3": {"config": {"zero_optimization": _S3, "zero": {"node_range": False}}},
        "stage0": {"config": {"zero_optimization": {"stage": 0}}},
        "stage2": {"config": {"zero_optimization": {"stage": 2}}},
        "stage3": {"config": {"zero_optimization": _S3}},
        "stage1_forced": {"config": {"zero_optimization": {"stage": 1},
                                     "zero": {"node_range": True}}},
    }
    results = run_torchrun(tmp_path, world, cases, STEPS)
    for name, r in results.items():
        assert r["ranks_agree"], name
    # Rank-order sums in the range, rank-order sums over gloo: the same bits.
    assert len({r["digest"] for r in results.values()}) == 1, \
        {n: r["digest"] for n, r in results.items()}
    assert "node_range" not in results["gloo_stage3"]["stats"]
    for name in ("stage0", "stage2", "stage3", "stage1_forced"):
        info = results[name]["stats"]["node_range"]
        assert info["local_world"] == world and info["local_rank"] == 0, info
        assert info["virtual_bytes"] == world * info["slice_bytes"], info
        # Every process backs its own slice; rank 0 sees all of them.
        assert len(info["announced_bytes"]) == world and min(info["announced_bytes"]) > 0, info
    assert _dev_shm() == before, "the run left shared memory behind"


def test_a_killed_process_is_named_by_its_node_peers():
    """kill -9 of local rank 2 of 3 mid-step (stage 3, in backward): the two
    others fail with a ZeroError naming it long before any timeout."""
    before = _dev_shm()
    results = launch_ranks(3, "kill_worker.py", ["--victim", "2", "--stage", "3"], 60,
                           env={"LOCAL_WORLD_SIZE": "3"})
    assert results[2][0] == -9, results[2]
    for rank in (0, 1):
        code, err = results[rank]
        assert code == 3, (rank, code, err[-3000:])
        assert "rank 2" in err, err[-3000:]
    assert _dev_shm() == before


def test_on_where_it_cannot_be_is_refused_with_the_reason():
    import torch

    import zero
    model = torch.nn.Linear(4, 4)
    with pytest.raises(zero.ZeroError, match="node_range is on, but no process group"):
        zero.wrap(model, torch.optim.SGD(model.parameters(), lr=0.1),
                  {"zero": {"node_range": True}})


def test_a_hung_process_fails_its_node_peers_within_the_group_timeout():
    """SIGSTOP of local rank 2 of 3 mid-step: alive, so no pidfd fires; the
    others fail naming it once the process group's timeout (10 s here) has
    passed, not the range's default of 300 s."""
    import signal
    import subprocess
    import sys
    import time

    from conftest import HERE, _free_port
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()),
               WORLD_SIZE="3", LOCAL_WORLD_SIZE="3", OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, str(HERE / "kill_worker.py"), "--victim", "2",
                               "--stop", "--timeout", "10"],
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                              stderr=subprocess.PIPE, text=True) for r in range(3)]
    start = time.monotonic()
    try:
        results = [p.communicate(timeout=120) for p in procs[:2]]
        took = time.monotonic() - start
    finally:
        procs[2].send_signal(signal.SIGKILL)
        procs[2].communicate()
    for rank, (_, err) in enumerate(results):
        assert procs[rank].returncode == 3, (rank, err[-3000:])
        assert "rank 2" in err, err[-3000:]
    assert took < 90, took
