"""zero.time_summary counts the training loop's calls into the engine, by
kind, with the time the calling thread spent in them: what the peers
benchmark's breakdown reads beside the threads' CPU time."""

import pytest
import torch

import zero


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.b(torch.relu(self.a(x))).sum()


@pytest.mark.parametrize("stage", [2, 3])
def test_time_summary_counts_each_call(stage):
    torch.manual_seed(0)
    model = _Net()
    model, opt = zero.wrap(model, torch.optim.AdamW(model.parameters(), lr=1e-2),
                           {"zero_optimization": {"stage": stage}})
    assert zero.time_summary(model) == {}  # wrap itself is not the loop's time
    steps = 3
    for _ in range(steps):
        model(torch.ones(4, 8)).backward()
        opt.step()
        opt.zero_grad()
    summary = zero.time_summary(model)
    assert summary["add_grad"]["calls"] == 4 * steps  # 2 weights + 2 biases per step
    assert summary["step"]["calls"] == steps
    assert summary["zero_grad"]["calls"] == steps
    for kind, entry in summary.items():
        assert entry["seconds"] > 0, kind
    # Stage 3: each of the 2 modules fetched (and its gather awaited) and
    # released once in forward and once in backward.
    gathers = {"fetch", "wait_fetched", "release"}
    assert gathers <= set(summary) if stage == 3 else not gathers & set(summary)
    for kind in gathers & set(summary):
        assert summary[kind]["calls"] == 2 * 2 * steps, kind


def test_time_summary_of_an_unwrapped_model_is_refused():
    with pytest.raises(zero.ZeroError, match="not wrapped by zero.wrap"):
        zero.time_summary(torch.nn.Linear(2, 2))
