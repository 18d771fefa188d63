"""What zero.wrap cannot serve is refused when wrapping, naming the
parameter or module, and a loop's misuse is said in the calls it made
(loss.backward(), optimizer.step(), zero_grad()), not the engine's terms.
After each refusal the model trains on as if it had not happened."""

import re

import pytest
import torch

import zero


class _Tiny(torch.nn.Module):
    def __init__(self, **embedding):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 8, **embedding)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, ids):
        return self.head(self.embed(ids)).sum()


def _wrap(model, config=None):
    return zero.wrap(model, torch.optim.AdamW(model.parameters(), lr=1e-2), config or {})


@pytest.mark.filterwarnings("ignore:Complex modules")
@pytest.mark.parametrize("make,said", [
    (lambda: _Tiny(sparse=True), "module 'embed' (Embedding) has sparse=True"),
    (lambda: _Tiny().double(), "parameter 'embed.weight' is torch.float64"),
    (lambda: _Tiny().to(torch.complex64), "parameter 'embed.weight' is torch.complex64"),
    (lambda: torch.nn.DataParallel(_Tiny()), "already inside DataParallel"),
])
def test_what_wrap_cannot_serve_is_refused_at_wrap(make, said):
    model = make()
    with pytest.raises(zero.ZeroError, match=said.replace("(", r"\(").replace(")", r"\)")):
        _wrap(model)
    assert getattr(model, "_zero_state", None) is None  # nothing half-wrapped


def test_a_frozen_float64_parameter_is_left_alone():
    model = _Tiny()
    model.embed.weight.data = model.embed.weight.data.double()
    model.embed.weight.requires_grad_(False)
    model.embed.weight.data = model.embed.weight.data.float()  # forward needs one dtype
    _wrap(model)  # only trainable parameters must be servable


def _ids(step):
    return torch.tensor([[step % 10, (3 * step + 1) % 10]])


def _trained(stage, misuse, accumulation=1):
    """Two steps of a model whose loop misused it once before them (after
    the refusal: zero_grad, as a loop that caught it would); its parameters
    and the refusal's message."""
    torch.manual_seed(0)
    config = {"zero_optimization": {"stage": stage}, "gradient_accumulation_steps": accumulation}
    model, opt = _wrap(_Tiny(), config)
    said = None
    if misuse is not None:
        with pytest.raises(zero.ZeroError) as refused:
            misuse(model, opt)
        said = str(refused.value)
        opt.zero_grad()
    for step in range(2):
        for _ in range(accumulation):
            model(_ids(step)).backward()
        opt.step()
        opt.zero_grad()
    return zero.full_parameters(model), said


def _two_backwards(model, opt):
    model(_ids(0)).backward()
    model(_ids(0)).backward()


def _step_alone(model, opt):
    opt.step()


def _short_accumulation(model, opt):
    model(_ids(0)).backward()
    opt.step()


class _FailingBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("out of memory (simulated)")


def _step_after_a_failed_backward(model, opt):
    with pytest.raises(RuntimeError, match="simulated"):
        model.head(_FailingBackward.apply(model.embed(_ids(0)))).sum().backward()
    opt.step()


@pytest.mark.parametrize("stage", [0, 3])
@pytest.mark.parametrize("misuse,accumulation,said", [
    (_two_backwards, 1, r"loss.backward\(\): 2 backward passes since the last optimizer.step\(\), "
                        r"and gradient_accumulation_steps is 1"),
    (_step_alone, 1, r"optimizer.step\(\) with no loss.backward\(\) since the last step"),
    (_short_accumulation, 2, r"optimizer.step\(\) after 1 backward pass, and "
                             r"gradient_accumulation_steps is 2"),
    (_step_after_a_failed_backward, 1, r"optimizer.step\(\): the last backward pass did not "
                                       r"finish \(it raised\): call optimizer.zero_grad\(\)"),
], ids=["two-backwards", "step-alone", "short-accumulation", "step-after-failed-backward"])
def test_misuse_is_said_in_the_loops_terms_and_loses_nothing(stage, misuse, accumulation, said):
    clean, _ = _trained(stage, None, accumulation)
    after, message = _trained(stage, misuse, accumulation)
    assert re.search(said, message), message
    assert "module 1" not in message and "FAILED_PRECONDITION" not in message
    for name in clean:
        assert torch.equal(clean[name], after[name]), name
