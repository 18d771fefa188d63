"""The wrapped optimizer's state_dict / load_state_dict (_optim_state.py),
in one process (world 1: this rank's pieces are whole parameters); the
sharded forms across processes are hf_worker.py's "optim" checks."""

import copy

import pytest
import torch

import zero
from zero.examples.gpt import GPT, param_groups, train_steps


def wrapped(stage=2, precision=None, model=None):
    torch.manual_seed(0)
    model = model if model is not None else GPT()
    opt = torch.optim.AdamW(param_groups(model), lr=3e-3, foreach=False)
    config = {"zero_optimization": {"stage": stage}}
    if precision:
        config[precision] = {"enabled": True}
    return zero.wrap(model, opt, config)


def train(model, opt, steps):
    return train_steps(model, opt, steps)


def test_state_dict_is_what_torch_adamw_holds():
    torch.manual_seed(0)
    reference = GPT()
    model, opt = wrapped(model=copy.deepcopy(reference))
    ref_opt = torch.optim.AdamW(param_groups(reference), lr=3e-3, foreach=False)
    train(model, opt, range(3))
    train(reference, ref_opt, range(3))
    mine, theirs = opt.state_dict(), ref_opt.state_dict()
    assert mine["param_groups"] == theirs["param_groups"]
    assert sorted(mine["state"]) == sorted(theirs["state"])
    for i, entry in theirs["state"].items():
        assert float(mine["state"][i]["step"]) == float(entry["step"]) == 3
        for name in ("exp_avg", "exp_avg_sq"):
            # After 3 steps the parameters differ from torch's by rounding
            # (the engine's Adam orders its float operations its own way),
            # so the gradients and these do: by at most 1e-5 of the
            # largest value.
            got = mine["state"][i][name].view(entry[name].shape)
            scale = float(entry[name].abs().max())
            torch.testing.assert_close(got, entry[name], rtol=1e-5, atol=1e-5 * scale)
    meta = mine["zero"]
    assert meta["form"] == "sharded" and meta["world_size"] == 1 and meta["steps"] == 3


@pytest.mark.parametrize("stage,precision", [(0, None), (3, None), (2, "bf16")])
def test_round_trip_resumes_bit_for_bit(stage, precision):
    model, opt = wrapped(stage, precision)
    train(model, opt, range(2))
    saved = copy.deepcopy(opt.state_dict())
    first = train(model, opt, range(2, 4))
    opt.load_state_dict(saved)
    assert train(model, opt, range(2, 4)) == first


def test_a_plain_torch_state_dict_loads():
    """A torch AdamW's state (no masters): the parameters stay, the moments
    and the step count are torch's; training on matches torch's."""
    torch.manual_seed(0)
    reference = GPT()
    ref_opt = torch.optim.AdamW(param_groups(reference), lr=3e-3, foreach=False)
    train(reference, ref_opt, range(2))
    model, opt = wrapped(model=copy.deepcopy(reference))
    opt.load_state_dict(ref_opt.state_dict())
    assert opt.state_dict()["zero"]["steps"] == 2
    mine, theirs = train(model, opt, range(2, 4)), train(reference, ref_opt, range(2, 4))
    assert mine == pytest.approx(theirs, rel=1e-5)


def test_full_state_dict_in_one_process_is_whole():
    model, opt = wrapped(3)
    train(model, opt, range(1))
    full = opt.full_state_dict()
    assert full["zero"]["form"] == "full"
    for i, meta in full["zero"]["params"].items():
        assert list(full["state"][i]["exp_avg"].shape) == meta["shape"]
        assert list(full["zero"]["master"][i].shape) == meta["shape"]


def refuse(opt, sd, text):
    before = copy.deepcopy(opt.state_dict())
    with pytest.raises(zero.ZeroError, match=text):
        opt.load_state_dict(sd)
    after = opt.state_dict()
    for i, entry in before["state"].items():
        for name, value in entry.items():
            assert torch.equal(after["state"][i][name], value), "changed by a refused load"


def test_bad_state_dicts_are_refused_and_change_nothing():
    model, opt = wrapped()
    train(model, opt, range(1))
    good = opt.state_dict()
    refuse(opt, {"state": {}}, "not an optimizer state_dict")
    refuse(opt, dict(good, param_groups=good["param_groups"][:1]), "1 param groups")
    other = copy.deepcopy(good)
    other["param_groups"][0]["eps"] = 1e-3
    refuse(opt, other, "eps")
    missing = copy.deepcopy(good)
    del missing["state"][0]
    refuse(opt, missing, "no state for parameter '%s'" % good["zero"]["params"][0]["name"])
    short = copy.deepcopy(good)  # as if another rank's piece: elements from 16 on
    short["zero"]["params"][0]["offset"] = 16
    refuse(opt, short, r"holds elements \[16, .*this rank owns \[0,")


def test_hyperparameters_round_trip_and_a_group_count_mismatch_is_refused():
    """What ZeroTrainer and ZeroStrategy save beside zero's checkpoint: the
    groups' settings without their parameters, set back as torch's
    load_state_dict would (lr), refused whole when the counts differ."""
    from zero import _optim_state
    model, opt = wrapped()
    saved = _optim_state.hyperparameters(opt.param_groups)
    assert all("params" not in g for g in saved) and len(saved) == len(opt.param_groups)
    before = [g["lr"] for g in opt.param_groups]
    with pytest.raises(zero.ZeroError, match="'ckpt' has 1 param groups, the optimizer %d"
                       % len(opt.param_groups)):
        _optim_state.set_hyperparameters(opt.param_groups, saved[:1], "'ckpt'")
    assert [g["lr"] for g in opt.param_groups] == before
    params = [g["params"] for g in opt.param_groups]
    _optim_state.set_hyperparameters(opt.param_groups, [dict(g, lr=0.5) for g in saved], "x")
    assert [g["lr"] for g in opt.param_groups] == [0.5] * len(saved)
    assert [g["params"] for g in opt.param_groups] == params
