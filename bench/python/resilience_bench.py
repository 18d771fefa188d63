"""What snapshots cost: the example GPT under zero.wrap with a "resilience"
config (a snapshot every step into /dev/shm) against the same without, same
processes, alternating rounds (CPU, gloo):

    torchrun --standalone --nproc_per_node=2 bench/python/resilience_bench.py

Prints the mean step time of each (a snapshot's cost falls on the steps
it overlaps, so not the median), their ratio (issue 38's goal: at most
1.05) and the host memory the snapshots hold per process (two states:
the published one and the one in flight). Needs an optimized library
(`bazel build -c opt //zero/capi:zero_engine`)."""

import argparse
import os
import shutil
import statistics
import time
import uuid

import torch
import torch.distributed as dist

import zero
from zero.examples.gpt import GPT, batch, loss_fn, param_groups


def _steps(snapshots, args, rank, root):
    torch.manual_seed(0)
    model = GPT(dim=args.dim, layers=args.layers)
    opt = torch.optim.AdamW(param_groups(model), lr=1e-3)
    config = {"zero_optimization": {"stage": args.stage}}
    if snapshots:
        config["resilience"] = {"snapshot_dir": root, "snapshot_every": args.every}
    model, opt = zero.wrap(model, opt, config)
    times = []
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        x, y = batch(step, rank, 0)
        loss_fn(model(x), y).backward()
        opt.step()
        opt.zero_grad()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    return times


def _bytes(root):
    total = 0
    for folder, _, files in os.walk(root):
        total += sum(os.path.getsize(os.path.join(folder, f)) for f in files)
    return total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--stage", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--every", type=int, default=1, help="snapshot every this many steps")
    args = parser.parse_args()
    if not zero.build_info()["optimized"]:
        raise SystemExit("not an optimized build: `bazel build -c opt //zero/capi:zero_engine`")
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    box = [uuid.uuid4().hex[:12]]
    dist.broadcast_object_list(box)
    root = "/dev/shm/zero-resilience-bench-%s" % box[0]
    times = {False: [], True: []}
    held = 0
    for round_ in range(args.rounds):
        here = "%s-%d" % (root, round_)  # a fresh start each round, not a resume
        for snapshots in (False, True):
            times[snapshots] += _steps(snapshots, args, rank, here)
            if snapshots:
                dist.barrier()
                held = max(held, _bytes(here))
                dist.barrier()
                if rank == 0:
                    shutil.rmtree(here, ignore_errors=True)
    if rank == 0:
        plain, snap = statistics.mean(times[False]), statistics.mean(times[True])
        print("%d processes, stage %d, mean step: without %.1f ms, with a snapshot every %d "
              "step(s) %.1f ms: ratio %.3f; snapshots in /dev/shm: %.1f MB for the node (%.1f MB "
              "per process)" % (world, args.stage, 1e3 * plain, args.every, 1e3 * snap,
                                snap / plain, held / 1e6, held / 1e6 / world))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
