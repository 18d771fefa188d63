"""zero.wrap's bad input, each a ZeroError naming what is wrong (one
process, no torch.distributed: a group of one)."""

import json
import warnings

import pytest
import torch

from conftest import launch_ranks

import zero
from zero.examples.gpt import GPT, batch, loss_fn, param_groups


def _model_and_adamw():
    torch.manual_seed(0)
    model = GPT()
    return model, torch.optim.AdamW(param_groups(model), lr=1e-3, foreach=False)


def _raises(match, model, optimizer, config=None):
    with pytest.raises(zero.ZeroError, match=match):
        zero.wrap(model, optimizer, config)


def test_wrap_twice():
    model, opt = _model_and_adamw()
    model, opt2 = zero.wrap(model, opt, {})
    _raises("already wrapped", model, opt)
    _raises("optimizer is already wrapped", GPT(), opt2)
    block = model.blocks[0]  # a submodule of the wrapped model
    _raises(r"parameter '.*' already belongs to a model wrapped by zero.wrap", block,
            torch.optim.AdamW(block.parameters(), lr=1e-3, foreach=False))


def test_model_on_an_unsupported_device_or_on_several():
    model = GPT().to("meta")
    opt = torch.optim.AdamW(param_groups(model), lr=1e-3, foreach=False)
    _raises("the model is on meta: zero runs on CPUs and CUDA cards", model, opt)
    model = GPT()
    model.proj.to("meta")
    opt = torch.optim.AdamW(param_groups(model), lr=1e-3, foreach=False)
    _raises(r"trainable parameters are on several devices \(cpu, meta\)", model, opt)
    model, opt = _model_and_adamw()
    _raises(r"config zero.devices 'cuda:1' is not where the model is \(cpu\)", model, opt,
            {"zero": {"devices": "cuda:1"}})


def test_parameter_missing_from_the_optimizer():
    model = GPT()
    opt = torch.optim.AdamW(model.blocks.parameters())
    _raises("parameter 'wte.weight' is trainable but in no param group", model, opt)


def test_parameter_in_two_groups():
    model = GPT()
    opt = torch.optim.SGD([{"params": [model.proj.weight]}, {"params": [model.ln_f.weight]}])
    opt.param_groups[1]["params"].append(model.proj.weight)  # torch itself refuses duplicates
    _raises("parameter 'proj.weight' is in param groups 0 and 1", model, opt)


def test_parameter_outside_the_model():
    model = GPT()
    opt = torch.optim.AdamW(list(model.parameters()) + [torch.nn.Parameter(torch.ones(3))])
    _raises(r"holds a parameter of shape \(3,\) that is not in the model", model, opt)


def test_unsupported_optimizer_and_options():
    model = GPT()
    _raises("optimizer RMSprop is not supported", model, torch.optim.RMSprop(model.parameters()))
    _raises("'amsgrad'", model, torch.optim.Adam(model.parameters(), amsgrad=True))


@pytest.mark.parametrize("config, match", [
    ({"zero_optimization": {"stage": 4}}, "'zero_optimization.stage'"),
    ({"zero_optimization": {"stage": 2, "stage3_prefetch_bucketsize": 1}},
     "'zero_optimization.stage3_prefetch_bucketsize' is unknown"),
    ({"fp16": {"enabled": True, "loss_scale": 128}}, "'fp16.loss_scale'"),
    ({"optimizer": {"type": "Adam"}}, "'optimizer': zero.wrap takes the torch optimizer"),
    ({"zero_optimization": {"stage": 1, "offload_param": {"device": "cpu"}}},
     "offload_param' needs stage >= 3"),
    ({"train_batch_size": 10, "train_micro_batch_size_per_gpu": 4,
      "gradient_accumulation_steps": 2}, "train_batch_size 10"),
    # Smaller than one micro-batch on every process: was silently 1 step.
    ({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 16},
     "train_batch_size 8 != .* gradient_accumulation_steps 0"),
    ({"activation_checkpointing": {}}, "'activation_checkpointing' is unknown"),
    ({"zero": {"fetch_granularity": "leaf"}}, "'zero.fetch_granularity'"),
])
def test_bad_config_key(config, match):
    model, opt = _model_and_adamw()
    _raises(match, model, opt, config)


def test_checkpoint_calls_on_an_unwrapped_model(tmp_path):
    for call in (lambda m: zero.save_checkpoint(m, tmp_path), zero.state_dict,
                 lambda m: zero.load_state_dict(m, {}), zero.memory_summary):
        with pytest.raises(zero.ZeroError, match="not wrapped"):
            call(GPT())


def test_consolidate_and_safetensors_errors(tmp_path):
    with pytest.raises(zero.ZeroError, match="consolidating"):
        zero.consolidate(tmp_path / "none", tmp_path / "out.safetensors")
    (tmp_path / "short.safetensors").write_bytes(b"\x10\x00")
    with pytest.raises(zero.ZeroError, match="not a safetensors file"):
        zero.read_safetensors(tmp_path / "short.safetensors")


def test_config_from_a_json_file(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"zero_optimization": {"stage": 3}, "steps_per_print": 10}))
    model, opt = _model_and_adamw()
    model, opt = zero.wrap(model, opt, str(path))
    assert zero.memory_summary(model)["stage"] == 3


def test_changing_more_than_lr_is_an_error():
    model, opt = _model_and_adamw()
    model, opt = zero.wrap(model, opt, {})
    opt.param_groups[0]["weight_decay"] = 0.5
    x, y = batch(0, 0, 0)
    with pytest.raises(zero.ZeroError, match="param group 0's 'weight_decay' changed"):
        opt.step()


def test_lr_change_takes_effect_next_step():
    model, opt = _model_and_adamw()
    model, opt = zero.wrap(model, opt, {"zero_optimization": {"stage": 2}})
    for group in opt.param_groups:
        group["lr"] = 0.0
    before = zero.full_parameters(model)
    x, y = batch(0, 0, 0)
    loss_fn(model(x), y).backward()
    opt.step()
    after = zero.full_parameters(model)
    assert all(torch.equal(before[n], after[n]) for n in before)  # AdamW with lr 0


def test_a_step_short_of_its_micro_batches_is_refused():
    model, opt = _model_and_adamw()
    model, opt = zero.wrap(model, opt, {"gradient_accumulation_steps": 2})
    x, y = batch(0, 0, 0)
    loss_fn(model(x), y).backward()
    with pytest.raises(zero.ZeroError, match=r"optimizer.step\(\) after 1 backward pass"):
        opt.step()  # one micro-batch of two


def test_nvme_offload_reaches_the_engine(tmp_path):
    from zero import _config
    ds = {"zero_optimization": {"stage": 2, "offload_optimizer": {
        "device": "nvme", "nvme_path": str(tmp_path), "pin_memory": True}}}
    engine = _config.engine_config(ds, 1)[0]
    assert (engine["offload"], engine["offload_device"], engine["nvme_path"]) == \
        ("optimizer", "nvme", str(tmp_path))
    with pytest.raises(zero.ZeroError, match="nvme_path' is required"):
        _config.engine_config({"zero_optimization": {"stage": 2, "offload_optimizer": {
            "device": "nvme"}}}, 1)
    with pytest.raises(zero.ZeroError, match="offload_param.device"):
        _config.engine_config({"zero_optimization": {"stage": 3, "offload_param": {
            "device": "nvme", "nvme_path": str(tmp_path)}}}, 1)


def test_overlap_comm_reaches_the_engine():
    from zero import _config
    for value in (True, False):
        ds = {"zero_optimization": {"stage": 2, "overlap_comm": value}}
        assert _config.engine_config(ds, 1)[0]["overlap_comm"] is value
    assert "overlap_comm" not in _config.engine_config({"zero_optimization": {"stage": 2}}, 1)[0]


def test_killed_process_is_named_by_the_others():
    """kill -9 of rank 2 of 3 mid-step (stage 3, in backward): ranks 0 and 1
    fail with a ZeroError naming rank 2 well within the process group's 30 s
    timeout."""
    results = launch_ranks(3, "kill_worker.py", ["--victim", "2", "--stage", "3"], 60)
    assert results[2][0] == -9, results[2]
    for rank in (0, 1):
        code, err = results[rank]
        assert code == 3, (rank, code, err[-3000:])
        assert "rank 2 stopped responding" in err, err[-3000:]


def test_a_model_that_differs_across_processes():
    results = launch_ranks(2, "differ_worker.py", [], 120)
    for rank, (code, err) in enumerate(results):
        assert code == 3, (rank, err[-3000:])
        assert "the model differs across processes" in err, err[-3000:]
        assert "rank 0 has wpe (16, 32)" in err and "rank 1 has wpe (16, 48)" in err, err[-3000:]



def test_build_info_and_the_unoptimized_warning(monkeypatch):
    info = zero.build_info()
    assert set(info) == {"optimized", "assertions", "path"}
    assert isinstance(info["optimized"], bool) and info["path"].endswith(".so")
    monkeypatch.delenv("ZERO_ALLOW_UNOPTIMIZED", raising=False)
    monkeypatch.setattr(zero._lib, "_warned_unoptimized", False)
    if not info["optimized"]:
        with pytest.warns(RuntimeWarning, match="built without optimization.*-c opt"):
            zero.wrap(*_model_and_adamw(), {})
    with warnings.catch_warnings():  # optimized: never; unoptimized: once per process
        warnings.simplefilter("error")
        zero.wrap(*_model_and_adamw(), {})


def test_zeropp_keys_reach_the_engine():
    from zero import ZeroError, _config
    ds = {"zero_optimization": {"stage": 3, "zero_quantized_weights": True,
                                "zero_quantized_gradients": True, "zero_hpz_partition_size": 8},
          "zero": {"quantization_block": 256, "error_feedback": True}}
    engine = _config.engine_config(ds, 1)[0]
    assert engine["quantized_weights_bits"] == 8  # ZeRO++'s widths for true
    assert engine["quantized_gradients_bits"] == 4
    assert engine["hpz_partition_size"] == 8
    assert engine["quantization_block"] == 256 and engine["error_feedback"] is True
    engine = _config.engine_config({"zero_optimization": {"stage": 2,
                                                          "zero_quantized_gradients": 8}}, 1)[0]
    assert engine["quantized_gradients_bits"] == 8
    for bad in (3, "int8", 1.5):
        with pytest.raises(ZeroError, match="zero_quantized_weights' has an unsupported value"):
            _config.engine_config({"zero_optimization": {"stage": 3,
                                                         "zero_quantized_weights": bad}}, 1)
    with pytest.raises(ZeroError, match="zero_hpz_partition_size"):
        _config.engine_config({"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 0}}, 1)
    assert _config.engine_config({"zero_optimization": {"stage": 3, "mics_shard_size": 4}},
                                 1)[0]["shard_group_size"] == 4
    with pytest.raises(ZeroError, match="mics_shard_size"):
        _config.engine_config({"zero_optimization": {"stage": 3, "mics_shard_size": 0}}, 1)
