"""Checkpoints and state dicts from Python (ckpt_worker.py): saved by 4
processes, loaded by 4 at another stage (training goes on bit for bit as
the uninterrupted run) and by 2 at stages 3 and 1 (states identical after
loading; training on the same global batches goes on within SGD's rounding
bound of the 4-process run, whose sums run in another order; the two
stages agree bit for bit). The consolidated state_dict has the model's own
keys and loads into a plain model; a plain state_dict loads into a wrapped
one; bad input is an error that changes nothing."""

import json

import pytest

from conftest import torchrun


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpt")
    out = {}
    for phase, world in (("four", 4), ("two", 2)):
        target = root / ("%s.json" % phase)
        torchrun(world, "ckpt_worker.py", ["--phase", phase, "--dir", root, "--out", target])
        out.update(json.loads(target.read_text()))
    return out


def test_consolidated_state_dict(results):
    assert results["state_dict_on_rank0_only"]
    assert results["state_dict_keys"]  # the model's own keys, tied and frozen included
    assert results["state_dict_values"]
    assert results["state_dict_tied"]
    assert results["checkpoint_folder"].startswith("sgd/step-")


def test_resume_at_another_stage_is_exact(results):
    # Saved without blocking, the next steps training while it was written.
    assert results["async_folder"] == "adam/step-%d" % 4
    assert results["async_wait_again_same"]
    assert results["async_loaded_the_start"]
    assert results["adam_stage2_to_stage3_exact"]


def test_four_processes_into_two(results):
    for stage in (3, 1):
        assert results["loaded_exact_s%d" % stage]
        # SGD's bound of test_training.py: rounding-sized; a lost momentum
        # buffer would move parameters by ~lr * 0.9 * |buf| (>> 1e-4).
        assert results["max_diff_vs_four_s%d" % stage] < 1e-4
    assert results["stages_agree"]


def test_plain_state_dict_into_a_wrapped_model(results):
    assert results["load_state_dict_exact"]
    assert "missing keys ['ln_f.bias']" in results["missing_key_error"]
    assert "'proj.weight' has shape (3, 3)" in results["shape_error"]
    assert results["unchanged_after_bad_state_dict"]


def test_failed_load_changes_nothing(results):
    assert "missing" in results["missing_checkpoint_error"]
    assert results["unchanged_after_failed_load"]


def test_consolidated_safetensors(results):
    assert results["consolidated_exact"]
