"""zero.wrap under torchrun (gloo, CPU): the example GPT (tied embedding and
head, LayerNorm, attention, MLP, a functional use of a parameter in the
parent, a frozen parameter, a block called twice, a checkpointed block)
trained 12 steps with two param groups and an lr schedule against plain
PyTorch: at 2 processes every stage x fp32/bf16 x accumulation 1/2 x
offload (none, optimizer, and parameters at stage 3), plus SGD, clipping,
fp16 loss scaling, the other kinds of checkpointing and the optimizer
state on NVMe; at 4 processes a
subset that takes every value of each of those at least once.

Tolerances (the engine's optimizers compute torch's formulas without the
FMA torch's CPU kernels fuse, zero/README: so even one process differs
from torch by an ulp per operation, and sharding changes the order of the
gradient sum):
- Stages agree with each other and every rank with the others bit for bit
  (the reductions add in rank order whatever the stage).
- SGD (momentum, Nesterov): rounding differences stay rounding-sized; with
  |p| <= 4 an fp32 ulp is 4.8e-7 and a step does about 10 roundings, so 12
  steps stay below 12 * 10 * 4.8e-7 = 5.7e-5: the bound is 1e-4.
- AdamW divides by sqrt(v): a gradient that is zero up to rounding (sums
  that cancel) has a sign set by rounding alone, and its element moves by up
  to lr * (1 - b1) / sqrt(1 - b2) = 3.16 lr per step either way. The bound
  is therefore in lr units: sum over steps of 2 * 3.16 * lr_t (0.18 here),
  which the test states but does not lean on: it also requires the loss
  curve to match torch's within 1% and the parameters within 0.01.
- bf16 against fp32 torch: parameters are bf16 (8 bits of mantissa): within
  4 bf16 ulps of the largest parameter (4 * 2^-8 * 4 = 0.0625), loss within 3%.
  fp16 (11 bits) is held to the same bound.
- Offload runs the same update rules on the CPU: bit for bit the same as on
  the device, so offload cases share the stage's digest.
"""

import re

import pytest

from conftest import run_torchrun

STEPS = 12
OFFLOADS = {0: ("none",), 1: ("none", "optimizer"), 2: ("none", "optimizer"),
            3: ("none", "optimizer", "parameters")}


def _stage(stage, offload="none", **extra):
    z = {"stage": stage, "reduce_bucket_size": 3000}
    if stage == 3:
        z["stage3_param_persistence_threshold"] = 0  # really gather every module
    if offload != "none":
        z["offload_optimizer"] = {"device": "cpu"}
    if offload == "parameters":
        z["offload_param"] = {"device": "cpu"}
    config = {"zero_optimization": z}
    config.update(extra)
    return {"config": config}


def _sgd(case):
    return dict(case, optimizer="sgd")


def _name(stage, precision, gas, offload):
    return "%s_s%d_gas%d_%s" % (precision, stage, gas, offload)


def _matrix(keep=lambda stage, precision, gas, offload: True):
    """Stages 0-3 x fp32/bf16 x accumulation 1/2 x each offload the stage has."""
    cases = {}
    for stage, offloads in OFFLOADS.items():
        for precision in ("fp32", "bf16"):
            for gas in (1, 2):
                for offload in offloads:
                    if not keep(stage, precision, gas, offload):
                        continue
                    extra = {"gradient_accumulation_steps": gas}
                    if precision == "bf16":
                        extra["bf16"] = {"enabled": True}
                    cases[_name(stage, precision, gas, offload)] = _stage(stage, offload, **extra)
    return cases


FP16 = {"enabled": True, "initial_scale_power": 8}
# 2 processes: the whole matrix and the other options.
CASES_2 = {
    **_matrix(),
    **{"sgd_s%d" % s: _sgd(_stage(s)) for s in (0, 3)},
    "adamw_s2_clip": _stage(2, gradient_clipping=0.5),
    "adamw_s3_clip": _stage(3, gradient_clipping=0.5),
    **{"fp16_s%d" % s: _stage(s, fp16=FP16) for s in (0, 3)},
    # A scale that overflows: steps are skipped until it has come down.
    **{"fp16_overflow_s%d" % s: _stage(s, fp16=dict(FP16, initial_scale_power=20))
       for s in (0, 3)},
    "fp32_s3_reentrant": dict(_stage(3), checkpoint="reentrant"),
    "fp32_s3_no_checkpointing": dict(_stage(3), checkpoint="none"),
    "fp32_s3_blocks": _stage(3, zero={"fetch_granularity": "block"}),
    "bf16_s3_gas1_blocks_offload": _stage(3, "parameters", bf16={"enabled": True},
                                     zero={"fetch_granularity": "block"}),
}
# 4 processes: every value of every axis at least once (the whole matrix
# at 4 processes on 2 cores would double the suite's time).
CASES_4 = {
    **_matrix(lambda stage, precision, gas, offload:
              (stage, precision, gas, offload) in {(0, "fp32", 1, "none"), (3, "fp32", 1, "none"),
                                                   (1, "bf16", 2, "optimizer"),
                                                   (2, "fp32", 2, "none"),
                                                   (3, "bf16", 2, "parameters"),
                                                   (0, "bf16", 2, "none"),
                                                   (3, "fp32", 2, "optimizer")}),
    "sgd_s3": _sgd(_stage(3)),
}


# The example's two param groups (decay, no decay) with the state on NVMe,
# in a folder of the test's: the CPU offload's digest (below).
NVME_CASE = "fp32_s2_gas1_nvme"


@pytest.fixture(scope="module")
def world2(tmp_path_factory):
    nvme = _stage(2, "optimizer")
    nvme["config"]["zero_optimization"]["offload_optimizer"] = {
        "device": "nvme", "nvme_path": str(tmp_path_factory.mktemp("nvme"))}
    cases = dict(CASES_2, **{NVME_CASE: nvme})
    return run_torchrun(tmp_path_factory.mktemp("w2"), 2, cases, STEPS)


@pytest.fixture(scope="module")
def world4(tmp_path_factory):
    return run_torchrun(tmp_path_factory.mktemp("w4"), 4, CASES_4, STEPS)


def _lr_bound():
    lr = [3e-3 / (1 + 0.05 * s) for s in range(STEPS)]
    return sum(2 * 3.16 * x for x in lr)


def _results(world, world2, world4):
    return world2 if world == 2 else world4


def _groups(results, precision):
    """Matrix cases of one precision by accumulation: {gas: [names]}."""
    out = {}
    for name in results:
        m = re.fullmatch(r"%s_s\d_gas(\d)_(none|optimizer|parameters)" % precision, name)
        if m:
            out.setdefault(int(m.group(1)), []).append(name)
    return out


@pytest.mark.parametrize("world", [2, 4])
def test_ranks_agree_and_loss_falls(world, world2, world4):
    for name, r in _results(world, world2, world4).items():
        assert r["ranks_agree"], name
        if "overflow" not in name:  # test_fp16_loss_scaling
            assert r["losses"][-1] < 0.6 * r["losses"][0], (name, r["losses"])


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_stages_and_offloads_agree_bit_for_bit(world, precision, world2, world4):
    """Every stage and offload of one precision and accumulation: one digest."""
    r = _results(world, world2, world4)
    groups = _groups(r, precision)
    assert groups, precision
    for gas, names in groups.items():
        digests = {n: r[n]["digest"] for n in names}
        assert len(set(digests.values())) == 1, digests
    if world == 2:
        assert len(groups[1]) == len(groups[2]) == 8  # 4 stages, 8 stage/offload pairs
        assert r["sgd_s0"]["digest"] == r["sgd_s3"]["digest"]
        assert r["fp16_s0"]["digest"] == r["fp16_s3"]["digest"]
        assert r["adamw_s2_clip"]["digest"] == r["adamw_s3_clip"]["digest"]
        # Checkpointing (either kind) recomputes the same values.
        # So do both fetch granularities (module, block).
        for name in ("fp32_s3_reentrant", "fp32_s3_no_checkpointing", "fp32_s3_blocks"):
            assert r[name]["digest"] == r["fp32_s3_gas1_none"]["digest"], name
        assert r["bf16_s3_gas1_blocks_offload"]["digest"] == r["bf16_s3_gas1_none"]["digest"]


def test_param_groups_with_the_state_on_nvme(world2):
    """The NVMe step hands the optimizer staging buffers, yet each element
    steps with its own group's weight decay: bit for bit the CPU offload."""
    assert world2[NVME_CASE]["digest"] == world2["fp32_s2_gas1_optimizer"]["digest"]


@pytest.mark.parametrize("world", [2, 4])
def test_sgd_matches_torch(world, world2, world4):
    r = _results(world, world2, world4)["sgd_s3"]
    assert r["rank_order_max_diff"] < 1e-4
    assert r["concatenated_max_diff"] < 1e-4


@pytest.mark.parametrize("world", [2, 4])
def test_fp32_adamw_matches_torch(world, world2, world4):
    results = _results(world, world2, world4)
    names = [n for n in results if n.startswith("fp32_") or n.startswith("adamw")]
    assert names
    for name in names:
        r = results[name]
        assert r["concatenated_max_diff"] < min(0.01, _lr_bound()), name
        assert r["rank_order_max_diff"] < min(0.01, _lr_bound()), name


@pytest.mark.parametrize("world", [2, 4])
def test_bf16_matches_fp32_torch(world, world2, world4):
    results = _results(world, world2, world4)
    names = [n for n in results if n.startswith("bf16_")]
    assert names
    for name in names:
        r = results[name]
        assert r["concatenated_max_diff"] < 4 * 2 ** -8 * 4, name
        gas = re.search(r"_gas\d", name).group(0)
        fp32 = next(v for n, v in results.items() if n.startswith("fp32_") and gas in n)
        assert abs(r["losses"][-1] - fp32["losses"][-1]) < 0.03 * fp32["losses"][-1], name


def test_fp16_loss_scaling(world2):
    """fp16 (11-bit mantissa) against fp32 torch: within the bf16 bound,
    which is 8x its own ulp; an overflowing scale skips steps, backs off
    and then trains on, the same at every stage."""
    for name in ("fp16_s0", "fp16_s3"):
        r = world2[name]
        assert r["stats"]["skipped_steps"] == 0, name
        assert r["concatenated_max_diff"] < 4 * 2 ** -8 * 4, name
    a, b = world2["fp16_overflow_s0"], world2["fp16_overflow_s3"]
    assert a["stats"]["skipped_steps"] > 0 and a["stats"]["skipped_steps"] < STEPS
    assert a["stats"]["skipped_steps"] == b["stats"]["skipped_steps"]
    assert a["stats"]["loss_scale"] < 2.0 ** 20
    assert a["digest"] == b["digest"]
    assert a["losses"][-1] < a["losses"][0]


@pytest.mark.parametrize("world", [2, 4])
def test_model_state_bytes_match_the_formulas(world, world2, world4):
    """Device bytes of parameters, gradients and optimizer state equal the
    ZeRO paper's per-stage formula (zero/_memory.py) for every case; stage 3
    bf16 Adam is 16 bytes per parameter over the processes."""
    for name, r in _results(world, world2, world4).items():
        ms = r["stats"]["model_states"]
        assert ms["device_bytes"] == ms["formula_bytes"], (name, ms)
    for name in ("bf16_s3_gas1_none", "bf16_s3_gas2_none"):
        r = world2.get(name)
        if r is not None:
            padded = r["stats"]["padded_numel"]
            assert r["stats"]["model_states"]["device_bytes"] == 16 * padded // 2, name
