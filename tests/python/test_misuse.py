"""What a PyTorch loop may do to a wrapped model that used to train wrong in
silence (one process, a group of one): call a stage-3 submodule on its own,
load a plain state_dict through torch's own method, change requires_grad
after wrapping, and go on after a backward that raised."""

import gc
import weakref

import pytest
import torch

import zero


class _Two(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 16)
        self.b = torch.nn.Linear(16, 16)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


def _wrapped(config, seed=0):
    torch.manual_seed(seed)
    model = _Two()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=False)
    return zero.wrap(model, opt, config)


def _x(step):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(8, 16, generator=g)


def _expect_same_parameters(want_model, got_model):
    want, got = zero.full_parameters(want_model), zero.full_parameters(got_model)
    assert want.keys() == got.keys()
    for name in want:
        assert torch.equal(want[name], got[name]), name


STAGE3 = {"zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}}


def test_a_stage3_submodule_called_on_its_own_trains_as_through_the_model():
    """model.b(torch.tanh(model.a(x))) outside the wrapped forward: each
    submodule is the root of its own call (saved-tensor hooks, fetch-on-use),
    so backward rebuilds what it saved instead of reading freed memory (here
    reused by a gather of the other layer before backward)."""
    model, opt = _wrapped(STAGE3)
    direct, dopt = _wrapped(STAGE3)
    for step in range(3):
        loss = model(_x(step)).pow(2).sum()
        with torch.no_grad():
            model.a(_x(9))  # gathers a into the memory b was just released from
        loss.backward()
        opt.step()
        opt.zero_grad()
        loss = direct.b(torch.tanh(direct.a(_x(step)))).pow(2).sum()
        with torch.no_grad():
            direct.a(_x(9))
        loss.backward()
        dopt.step()
        dopt.zero_grad()
    _expect_same_parameters(model, direct)


def test_torch_load_state_dict_reaches_the_masters():
    """With offload the fp32 masters live apart from the parameters: torch's
    load_state_dict (a copy_ into the parameters) would be undone by the next
    step. On a wrapped model it is zero.load_state_dict."""
    config = {"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}
    model, opt = _wrapped(config)
    torch.manual_seed(7)
    other = _Two().state_dict()
    result = model.load_state_dict(other)
    assert result.missing_keys == [] and result.unexpected_keys == []
    for group in opt.param_groups:
        group["lr"] = 0.0  # AdamW with lr 0: the step writes the masters back unchanged
    model(_x(0)).sum().backward()
    opt.step()
    after = zero.full_parameters(model)
    for name, value in other.items():
        assert torch.equal(after[name], value), name
    with pytest.raises(zero.ZeroError, match="assign=True"):
        model.load_state_dict(other, assign=True)
    with pytest.raises(zero.ZeroError, match="missing keys"):
        model.load_state_dict({"a.weight": other["a.weight"]})


@pytest.mark.parametrize("change", ["frozen", "unfrozen"])
def test_requires_grad_changed_after_wrap_is_an_error(change):
    torch.manual_seed(0)
    model = _Two()
    if change == "unfrozen":
        model.a.bias.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    model, opt = zero.wrap(model, torch.optim.AdamW(params, lr=1e-2, foreach=False), {})
    model.a.bias.requires_grad_(change == "unfrozen")
    model(_x(0)).sum().backward()
    with pytest.raises(zero.ZeroError, match="parameter 'a.bias' was %s after zero.wrap"
                       % change):
        opt.step()


class _FailOnce(torch.autograd.Function):
    """Identity whose first backward raises (an OOM the loop catches)."""
    armed = True

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        if _FailOnce.armed:
            _FailOnce.armed = False
            raise RuntimeError("out of memory (simulated)")
        return g


@pytest.mark.parametrize("stage", [2, 3])
def test_a_backward_that_raised_is_dropped_by_zero_grad(stage):
    """Backward dies between the two layers' gradients; the loop catches it
    and calls zero_grad. The next steps train exactly as a run that never
    failed (at stage 3 the modules held for backward were released)."""
    config = {"zero_optimization": {"stage": stage, "stage3_param_persistence_threshold": 0}}
    clean, copt = _wrapped(config)
    failing, fopt = _wrapped(config)
    _FailOnce.armed = True
    with pytest.raises(RuntimeError, match="simulated"):
        failing.b(_FailOnce.apply(torch.tanh(failing.a(_x(0))))).sum().backward()
    fopt.zero_grad()
    for step in range(2):
        for model, opt in ((clean, copt), (failing, fopt)):
            model(_x(step)).pow(2).sum().backward()
            opt.step()
            opt.zero_grad()
    _expect_same_parameters(clean, failing)


def test_parameters_kept_after_their_model_keep_their_memory():
    """An un-cloned state_dict outlives the model, optimizer and engine's
    other owners: its tensors alias the engine's memory, which must stay."""
    model, opt = _wrapped({"zero_optimization": {"stage": 2}})
    kept = dict(model.state_dict())
    copies = {name: t.clone() for name, t in kept.items()}
    del model, opt
    gc.collect()
    for _ in range(3):  # reuse what a freed engine's memory would have been
        other, other_opt = _wrapped({"zero_optimization": {"stage": 2}}, seed=5)
        other(_x(0)).sum().backward()
        other_opt.step()
    for name, t in kept.items():
        assert torch.equal(t, copies[name]), name


@pytest.mark.parametrize("stage", [2, 3])
def test_a_wrapped_model_is_freed_with_its_last_reference(stage):
    """Autograd keeps parameter hooks in C++; hooks that held the wrapper
    made a cycle the collector cannot see, and every engine lived forever."""
    model, opt = _wrapped({"zero_optimization": {"stage": stage}})
    model(_x(0)).sum().backward()
    opt.step()
    engine = weakref.ref(model._zero_state.engine)
    del model, opt
    for _ in range(2):  # the wrapper's cycles, then the engine's with its parameters' memory
        gc.collect()
    assert engine() is None
