"""Issue 38 on one node, under torchrun --max-restarts: a process killed
mid-step, once the step before is published (tens of ms after it), costs no
completed step (the group restarts and zero.wrap resumes
from the snapshot in /dev/shm by itself, the script unchanged) and the run
ends with the bits of an uninterrupted one; a normal end leaves no
snapshot behind; a snapshot of another model is refused by name."""

import json
import os
import shutil
import subprocess
import sys
import uuid

import pytest
from conftest import HERE


def _run(tmp_path, name, snapshots, world=2, restarts=1, expect_failure=False, **kw):
    """torchrun --standalone --max-restarts=1 (a c10d rendezvous per
    attempt). TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: torch's workaround for
    its own restart bug (pytorch#135712: workers of the next attempt read the
    last attempt's gloo addresses from the shared store and fail to connect)."""
    out = tmp_path / ("%s.json" % name)
    args = ["--snapshot_dir", snapshots, "--out", out]
    for key, value in kw.items():
        args += ["--%s" % key] + ([] if value is True else [value])
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc_per_node=%d" % world, "--max-restarts=%d" % restarts,
           str(HERE / "resilience_worker.py")] + [str(a) for a in args]
    env = dict(os.environ, OMP_NUM_THREADS="1", TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if expect_failure:
        assert proc.returncode != 0, "the job was to fail"
        return None
    if proc.returncode != 0:
        pytest.fail("torchrun failed (%d):\n%s" % (proc.returncode, proc.stderr[-6000:]))
    return json.loads(out.read_text())


@pytest.fixture
def snapshots():
    path = "/dev/shm/zero-test-snapshots-%s" % uuid.uuid4().hex[:12]
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("stage", [1, 3])
def test_a_killed_process_costs_no_completed_step(tmp_path, snapshots, stage):
    plain = _run(tmp_path, "plain", snapshots, stage=stage)
    assert plain == dict(plain, attempt=0, start=0)
    assert not os.path.exists(snapshots), "a normal end left its snapshots"
    killed = _run(tmp_path, "killed", snapshots, stage=stage, kill_at=3)
    # Killed in step 3's backward: steps 0-2 were complete and all kept.
    assert (killed["attempt"], killed["start"]) == (1, 3), killed
    assert killed["digest"] == plain["digest"]
    assert not os.path.exists(snapshots)


def test_a_job_resumes_at_another_size(tmp_path, snapshots):
    """2 processes lose one for good (no restart): the snapshot stays. The
    job started again with 3 resumes from it at step 3 and ends with the
    bits of 3 processes that load the same snapshot by hand."""
    _run(tmp_path, "lost", snapshots, restarts=0, expect_failure=True, stage=3, kill_at=3)
    with open(os.path.join(snapshots, "latest")) as f:
        assert f.read().strip() == "step-3"
    copy = snapshots + "-copy"
    shutil.copytree(snapshots, copy)
    try:
        resumed = _run(tmp_path, "resumed", snapshots, world=3, stage=3)
        by_hand = _run(tmp_path, "by_hand", copy, world=3, stage=3, by_hand=True)
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    assert (resumed["attempt"], resumed["start"]) == (0, 3), resumed
    assert by_hand["start"] == 3
    assert resumed["digest"] == by_hand["digest"]


def test_a_snapshot_of_another_model_is_refused_by_name(tmp_path, snapshots):
    import torch

    import zero
    from zero.examples.gpt import GPT
    os.makedirs(snapshots)
    model = GPT()
    model, opt = zero.wrap(model, torch.optim.AdamW(model.parameters()),
                           {"resilience": {"snapshot_dir": snapshots}})
    zero.save_checkpoint(model, snapshots)
    other = torch.nn.Linear(4, 4)
    with pytest.raises(zero.ZeroError, match="resuming from .*step-0.* failed"):
        zero.wrap(other, torch.optim.AdamW(other.parameters()),
                  {"resilience": {"snapshot_dir": snapshots}})


def test_snapshots_that_cannot_be_written_stop_and_training_goes_on(tmp_path):
    """As with a full /dev/shm: a clear warning, then steps as before."""
    import torch

    import zero
    from zero.examples.gpt import GPT, batch, loss_fn
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    model = GPT()
    model, opt = zero.wrap(model, torch.optim.AdamW(model.parameters()),
                           {"resilience": {"snapshot_dir": str(blocker / "snapshots")}})
    with pytest.warns(RuntimeWarning, match="snapshots into .* stopped"):
        for step in range(3):
            x, y = batch(step, 0, 0)
            loss_fn(model(x), y).backward()
            opt.step()
            opt.zero_grad()
    x, y = batch(3, 0, 0)
    assert torch.isfinite(loss_fn(model(x), y))


@pytest.mark.parametrize("section,said", [
    ({"snapshot_every": 0}, "resilience.snapshot_every"),
    ({"checkpoint_every": 5}, "checkpoint_every needs resilience.checkpoint_dir"),
    ({"snapshot_dir": 3}, "resilience.snapshot_dir"),
    ({"every": 1}, "resilience.every' is unknown"),
])
def test_a_bad_resilience_section_is_named(section, said):
    import torch

    import zero
    model = torch.nn.Linear(4, 4)
    with pytest.raises(zero.ZeroError, match=said.replace(".", r"\.")):
        zero.wrap(model, torch.optim.SGD(model.parameters(), lr=0.1), {"resilience": section})


def test_on_resume_needs_a_resilience_section():
    import torch

    import zero
    model = torch.nn.Linear(4, 4)
    model, _ = zero.wrap(model, torch.optim.SGD(model.parameters(), lr=0.1), {})
    assert zero.resumed_step(model) == 0
    with pytest.raises(zero.ZeroError, match="needs a \"resilience\" config section"):
        zero.on_resume(model, dict, lambda state: None)


def test_the_snapshot_resumed_from_is_published_and_has_its_callers_state(tmp_path):
    """A snapshot is published by a background thread, its caller's state
    written at the next forward: a restart takes the newest with a manifest
    (every file whole) and, where the run keeps a caller's state, with it."""
    from zero._resilience import _newest_snapshot
    assert _newest_snapshot(str(tmp_path / "none")) is None
    for steps, published in ((2, True), (3, True), (4, False)):
        folder = tmp_path / ("step-%d" % steps)
        folder.mkdir()
        if published:
            (folder / "manifest").write_text("{}")
    assert _newest_snapshot(str(tmp_path)) == (3, str(tmp_path / "step-3"))
    (tmp_path / "user-step-2.json").write_text("{}")
    assert _newest_snapshot(str(tmp_path)) == (2, str(tmp_path / "step-2"))
    (tmp_path / "user-step-3.json").write_text("{}")
    assert _newest_snapshot(str(tmp_path)) == (3, str(tmp_path / "step-3"))
