"""One torchrun job of the Python tests: trains the example GPT under
zero.wrap for each case given, and on rank 0 trains two plain PyTorch
references of the same model with the same torch optimizer and scheduler:

- "rank order": each rank's batch forward/backward in turn, gradients summed
  in rank order and micro-batch order, scaled by 1/(ranks x micro-batches):
  the data-parallel arithmetic the engine promises, so fp32 must be equal
  bit for bit;
- "concatenated": one batch of every rank's rows (loss / micro-batches,
  torch's own accumulation): plain single-process training, equal up to the
  order of fp32 sums inside torch's kernels.

Writes {case: results} as JSON to --out (rank 0)."""

import argparse
import hashlib
import json
import time

import torch
import torch.distributed as dist

import zero
from zero.examples.gpt import GPT, batch, loss_fn, param_groups

SCHEDULE = lambda step: 1.0 / (1 + 0.05 * step)  # noqa: E731 - lr changes every step


def make(optimizer_name, checkpoint="nonreentrant"):
    torch.manual_seed(0)
    model = GPT(checkpoint=checkpoint)
    groups = param_groups(model)
    if optimizer_name == "sgd":
        opt = torch.optim.SGD(groups, lr=0.05, momentum=0.9, nesterov=True, foreach=False)
    else:
        opt = torch.optim.AdamW(groups, lr=3e-3, foreach=False)
    return model, opt


def train_wrapped(case, rank, steps):
    model, opt = make(case.get("optimizer", "adamw"), case.get("checkpoint", "nonreentrant"))
    model, opt = zero.wrap(model, opt, case["config"])
    sched = torch.optim.lr_scheduler.LambdaLR(opt, SCHEDULE)
    gas = case["config"].get("gradient_accumulation_steps", 1)
    fp16 = case["config"].get("fp16", {}).get("enabled", False)
    losses = []
    for step in range(steps):
        total = 0.0
        for micro in range(gas):
            x, y = batch(step, rank, micro)
            loss = loss_fn(model(x).float(), y)
            (loss * opt.loss_scale() if fp16 else loss).backward()  # fp16's one extra call
            total += loss.item()
        opt.step()
        opt.zero_grad()
        sched.step()
        losses.append(total / gas)
    params = zero.full_parameters(model)
    stats = zero.memory_summary(model)
    return params, losses, stats


def train_reference(case, world, steps, concatenated):
    model, opt = make(case.get("optimizer", "adamw"))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, SCHEDULE)
    gas = case["config"].get("gradient_accumulation_steps", 1)
    clip = case["config"].get("gradient_clipping", 0)
    params = [p for p in model.parameters() if p.requires_grad]
    for step in range(steps):
        if concatenated:
            for micro in range(gas):
                xs, ys = zip(*(batch(step, r, micro) for r in range(world)))
                (loss_fn(model(torch.cat(xs)), torch.cat(ys)) / gas).backward()
        else:
            total = None
            for micro in range(gas):
                summed = None
                for r in range(world):
                    model.zero_grad()
                    x, y = batch(step, r, micro)
                    loss_fn(model(x), y).backward()
                    grads = [p.grad.clone() for p in params]
                    summed = grads if summed is None else [s + g for s, g in zip(summed, grads)]
                total = summed if total is None else [t + s for t, s in zip(total, summed)]
            for p, t in zip(params, total):
                p.grad = t * (1.0 / (world * gas))
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        opt.zero_grad()
        sched.step()
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def digest(params):
    h = hashlib.sha256()
    for name in sorted(params):
        h.update(name.encode())
        h.update(params[name].contiguous().numpy().tobytes())
    return h.hexdigest()


def compare(params, reference):
    worst = 0.0
    for name, ref in reference.items():
        worst = max(worst, (params[name] - ref).abs().max().item())
    exact = all(torch.equal(params[n], r) for n, r in reference.items())
    return exact, worst


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    with open(args.cases) as f:
        cases = json.load(f)
    results, references = {}, {}
    for name, case in cases.items():
        start = time.perf_counter()
        params, losses, stats = train_wrapped(case, rank, args.steps)
        seconds = time.perf_counter() - start
        digests = [None] * world
        dist.all_gather_object(digests, digest(params))
        if rank == 0:
            out = {"digest": digests[0], "ranks_agree": len(set(digests)) == 1,
                   "losses": losses, "stats": stats, "seconds": seconds}
            for kind, concatenated in (("rank_order", False), ("concatenated", True)):
                # bf16/fp16, offload and the stage do not change the fp32 reference.
                key = (case.get("optimizer", "adamw"), concatenated,
                       case["config"].get("gradient_accumulation_steps", 1),
                       case["config"].get("gradient_clipping", 0))
                if key not in references:
                    references[key] = train_reference(case, world, args.steps, concatenated)
                out[kind + "_exact"], out[kind + "_max_diff"] = compare(params, references[key])
            out["param_scale"] = max(p.abs().max().item() for p in params.values())
            results[name] = out
        dist.barrier()
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
