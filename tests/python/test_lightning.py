"""zero.lightning.ZeroStrategy against Lightning's own DDPStrategy, on the
example GPT (lightning_worker.py under torchrun, 2 processes, gloo): every
micro-batch's loss, the lr of every step and the validation losses agree
at stages 0-3, and with manual optimization at stage 3; a run resumed from
ZeroStrategy's checkpoint folder continues the uninterrupted run exactly,
one resumed from DDP's plain file within the tolerance; bf16-mixed trains;
what the engine cannot do is refused with a message naming what the user
set.

The tolerance: DDP averages gradients with gloo's all-reduce, zero with its
rank-order reduce-scatter; the sums differ in their last bits, and six
clipped AdamW steps keep the losses within 1e-5 relative."""

import json
import math
import re
import subprocess
import sys

import pytest

from conftest import torchrun

pl = pytest.importorskip("lightning.pytorch")
torch = pytest.importorskip("torch")

import zero  # noqa: E402
from zero.lightning import ZeroStrategy  # noqa: E402

RTOL = 1e-5
MICRO_BATCHES, STEPS, SAVED_AT_STEP = 12, 6, 3  # per process; 2 micro-batches a step


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lightning")
    out = root / "runs.json"
    torchrun(2, "lightning_worker.py", ["--root", root, "--out", out])
    return json.loads(out.read_text())


def close(a, b, rtol=RTOL):
    assert len(a) == len(b) and len(a) > 0
    for x, y in zip(a, b):
        assert x == pytest.approx(y, rel=rtol), (a, b)


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_strategy_matches_ddp(runs, stage):
    ddp, mine = runs["ddp"], runs["zero%d" % stage]
    assert ddp["ddp"] and mine["ddp"] is False  # no DistributedDataParallel around zero's model
    assert len(mine["losses"]) == MICRO_BATCHES
    close(mine["losses"], ddp["losses"])
    close(mine["val"], ddp["val"])
    # The scheduler, made on configure_optimizers' optimizer, drives the
    # wrapped one's param groups.
    assert len(mine["lrs"]) == STEPS and mine["lrs"] == ddp["lrs"]


def test_resume_from_the_checkpoint_folder_continues_the_run(runs):
    full, resumed = runs["zero3"], runs["resumed3"]
    # Exact: masters, optimizer state and step count (zero/), lr, scheduler
    # and loop state (lightning.ckpt) all came back.
    assert resumed["losses"] == full["losses"][2 * SAVED_AT_STEP:]
    assert resumed["lrs"] == full["lrs"][SAVED_AT_STEP:]
    assert resumed["val"] == full["val"][1:]


def test_resume_from_a_ddp_checkpoint_file(runs):
    resumed, ddp = runs["from_ddp"], runs["ddp"]
    close(resumed["losses"], ddp["losses"][2 * SAVED_AT_STEP:])
    assert resumed["lrs"] == ddp["lrs"][SAVED_AT_STEP:]


def _final_state_dict(run, inside=""):
    folder = run["checkpoint"].replace("epoch=0-step=%d" % SAVED_AT_STEP,
                                       "epoch=1-step=%d" % STEPS)
    return torch.load(folder + inside, weights_only=False)["state_dict"]


def test_the_folder_holds_a_plain_lightning_checkpoint(runs):
    """lightning.ckpt beside zero/ has the whole model (gathered at stage 3,
    tied names included): stage 2's exactly, DDP's within 1e-4 (the key
    biases get no gradient but rounding noise, which Adam scales up)."""
    assert runs["layout"] == ["lightning.ckpt", "zero"]
    mine = _final_state_dict(runs["zero3"], "/lightning.ckpt")
    stage2 = _final_state_dict(runs["zero2"], "/lightning.ckpt")
    ddp = _final_state_dict(runs["ddp"])
    assert list(mine) == list(ddp) == list(stage2) and "net.head.weight" in mine
    for name, value in ddp.items():
        assert torch.equal(mine[name], stage2[name]), name
        assert torch.allclose(mine[name], value, rtol=0, atol=1e-4), name


def test_manual_optimization_matches_ddp(runs):
    mine, ddp = runs["manual3"], runs["manual_ddp"]
    assert len(mine["losses"]) == MICRO_BATCHES // 2 and len(mine["lrs"]) == MICRO_BATCHES // 2
    close(mine["losses"], ddp["losses"])
    assert mine["lrs"] == ddp["lrs"]


def test_bf16_mixed_trains(runs):
    losses = runs["bf16"]["losses"]
    assert len(losses) == MICRO_BATCHES and all(math.isfinite(x) for x in losses)
    assert losses[0] != runs["zero2"]["losses"][0]  # the engine's parameters are bf16
    close(losses[:1], runs["ddp"]["losses"][:1], rtol=2e-2)  # bf16 rounding, first step


def test_what_the_engine_cannot_do_is_refused(runs):
    assert "OwnClipping overrides configure_gradient_clipping" in runs["refused_clip"]
    assert ("an epoch has 5 batches, not a multiple of accumulate_grad_batches=2"
            in runs["refused_window"])


def test_fp16_is_refused_when_the_trainer_is_built():
    refusal = re.escape("Trainer(precision='16-true') is not supported")
    with pytest.raises(zero.ZeroError, match=refusal):
        pl.Trainer(strategy=ZeroStrategy(stage=2), accelerator="cpu", devices=2,
                   precision="16-true")


def test_two_stages_are_refused():
    with pytest.raises(zero.ZeroError, match="set it in one place"):
        ZeroStrategy(zero_config={"zero_optimization": {"stage": 3}}, stage=2)


def test_import_zero_does_not_import_lightning():
    code = ("import sys, zero; "
            "print('lightning' in sys.modules, 'zero.lightning' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["False", "False"]
