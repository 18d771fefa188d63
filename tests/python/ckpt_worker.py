"""The torchrun jobs of test_checkpoint.py. Phase "four" (4 processes)
trains, saves sharded checkpoints and the consolidated state_dict, and
trains on; phase "two" (2 processes) loads them at other stages and trains
on the same global batches. Rank 0 writes {check: value} as JSON to --out."""

import argparse
import hashlib
import json
import os

import torch
import torch.distributed as dist

import zero
from zero.examples.gpt import GPT, batch, loss_fn, param_groups

K = 4  # steps before the checkpoint, and after it


def make(kind, stage, gas=1):
    torch.manual_seed(0)
    model = GPT()
    if kind == "sgd":
        opt = torch.optim.SGD(param_groups(model), lr=0.05, momentum=0.9, nesterov=True)
    else:
        opt = torch.optim.AdamW(param_groups(model), lr=3e-3)
    config = {"zero_optimization": {"stage": stage, "reduce_bucket_size": 3000,
                                    "stage3_param_persistence_threshold": 0},
              "gradient_accumulation_steps": gas}
    return zero.wrap(model, opt, config)


def train(model, opt, steps, micro_batches):
    """`micro_batches(step)`: this rank's (x, y) list for the step."""
    for step in steps:
        for x, y in micro_batches(step):
            loss_fn(model(x), y).backward()
        opt.step()
        opt.zero_grad()


def own(rank):
    return lambda step: [batch(step, rank, 0)]


def digest(params):
    h = hashlib.sha256()
    for name in sorted(params):
        h.update(name.encode() + params[name].numpy().tobytes())
    return h.hexdigest()


def phase_four(root, rank, out):
    # SGD with momentum at stage 2: the state the 2-process phase reshards.
    model, opt = make("sgd", 2)
    train(model, opt, range(K), own(rank))
    sd = zero.state_dict(model)
    path = zero.save_checkpoint(model, os.path.join(root, "sgd"))
    at_save = zero.full_parameters(model)
    train(model, opt, range(K, 2 * K), own(rank))
    final = zero.full_parameters(model)
    out["state_dict_on_rank0_only"] = all(
        x == (r == 0) for r, x in enumerate(_gather(sd is not None)))
    if rank == 0:
        plain = GPT()
        out["state_dict_keys"] = list(sd) == list(plain.state_dict())
        out["state_dict_values"] = all(torch.equal(sd[n].flatten(), at_save[n].flatten())
                                       for n in at_save)
        out["state_dict_tied"] = sd["head.weight"] is sd["wte.weight"] or torch.equal(
            sd["head.weight"], sd["wte.weight"])
        plain.load_state_dict(sd)  # strict: raises on any missing or extra key
        out["checkpoint_folder"] = os.path.relpath(path, root)
        torch.save({"at_save": at_save, "final": final, "sd": sd},
                   os.path.join(root, "four.pt"))

    # AdamW: saved at stage 2 without blocking (the next steps train while
    # it is copied and written), loaded by 4 processes at stage 3, trains on
    # exactly as the uninterrupted run (same world: same arithmetic).
    model, opt = make("adamw", 2)
    train(model, opt, range(K), own(rank))
    at_start = digest(zero.full_parameters(model))
    pending = zero.save_checkpoint(model, os.path.join(root, "adam"), blocking=False)
    train(model, opt, range(K, 2 * K), own(rank))
    folder = pending.wait()
    out["async_folder"] = os.path.relpath(folder, root)
    out["async_wait_again_same"] = pending.wait() == folder
    uninterrupted = digest(zero.full_parameters(model))
    resumed, opt = make("adamw", 3)
    before = digest(zero.full_parameters(resumed))
    try:
        zero.load_checkpoint(resumed, os.path.join(root, "missing"))
        out["missing_checkpoint_error"] = ""
    except zero.ZeroError as e:
        out["missing_checkpoint_error"] = str(e)
    out["unchanged_after_failed_load"] = digest(zero.full_parameters(resumed)) == before
    zero.load_checkpoint(resumed, os.path.join(root, "adam"))
    out["async_loaded_the_start"] = digest(zero.full_parameters(resumed)) == at_start
    train(resumed, opt, range(K, 2 * K), own(rank))
    out["adam_stage2_to_stage3_exact"] = digest(zero.full_parameters(resumed)) == uninterrupted


def phase_two(root, rank, out):
    four = torch.load(os.path.join(root, "four.pt"))
    # Rank r's micro-batch m is what rank r + 2m drew in the 4-process run:
    # the same global batch, summed in another order.
    same_global = lambda step: [batch(step, rank + 2 * m, 0) for m in range(2)]  # noqa: E731
    digests = {}
    for stage in (3, 1):
        model, opt = make("sgd", stage, gas=2)
        zero.load_checkpoint(model, os.path.join(root, "sgd"))
        loaded = zero.full_parameters(model)
        out["loaded_exact_s%d" % stage] = all(torch.equal(loaded[n], four["at_save"][n])
                                              for n in loaded)
        train(model, opt, range(K, 2 * K), same_global)
        params = zero.full_parameters(model)
        digests[stage] = digest(params)
        out["max_diff_vs_four_s%d" % stage] = max(
            (params[n] - four["final"][n]).abs().max().item() for n in params)
    out["stages_agree"] = digests[3] == digests[1]

    # A plain state_dict into a wrapped model, and its errors.
    model, _ = make("adamw", 3)
    zero.load_state_dict(model, four["sd"])
    now = zero.full_parameters(model)
    out["load_state_dict_exact"] = all(torch.equal(now[n].flatten(), four["sd"][n].flatten())
                                       for n in now)
    bad = dict(four["sd"])
    del bad["ln_f.bias"]
    out["missing_key_error"] = _error(lambda: zero.load_state_dict(model, bad))
    bad = dict(four["sd"], **{"proj.weight": torch.zeros(3, 3)})
    out["shape_error"] = _error(lambda: zero.load_state_dict(model, bad))
    out["unchanged_after_bad_state_dict"] = digest(zero.full_parameters(model)) == digest(now)

    if rank == 0:
        target = os.path.join(root, "sgd.safetensors")
        zero.consolidate(os.path.join(root, "sgd"), target)
        flat = zero.read_safetensors(target)
        out["consolidated_exact"] = sorted(flat) == sorted(four["at_save"]) and all(
            torch.equal(flat[n], four["at_save"][n].flatten()) for n in flat)


def _error(fn):
    try:
        fn()
    except zero.ZeroError as e:
        return str(e)
    return ""


def _gather(value):
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, value)
    return every


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--phase", choices=("four", "two"), required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    out = {}
    (phase_four if args.phase == "four" else phase_two)(args.dir, rank, out)
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
