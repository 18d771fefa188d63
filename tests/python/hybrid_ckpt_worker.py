"""A process of test_topology.py's hybrid checkpoint test, under torchrun
--nnodes=2 (two launchers of 2): trains the example GPT with hybrid sharding
(groups of 2, replicated across the 2 nodes) for K steps, saves a sharded
checkpoint (the first group's 2 files), trains K more; then a fresh model
loads the checkpoint, with the same hybrid setting and at plain stage 3
(sharded over all 4), and trains the same K steps. Rank 0 writes the three
final digests to --out."""

import argparse
import hashlib
import json
import os

import torch
import torch.distributed as dist

import zero
from zero.examples.gpt import GPT, batch, loss_fn, param_groups

K = 3
HYBRID = {"zero_optimization": {"stage": 2}, "zero": {"shard_group_size": 2}}
STAGE3 = {"zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}}


def wrap(config):
    torch.manual_seed(0)
    model = GPT()
    return zero.wrap(model, torch.optim.AdamW(param_groups(model), lr=3e-3), config)


def train(model, opt, first, rank):
    for step in range(first, first + K):
        x, y = batch(step, rank, 0)
        loss_fn(model(x), y).backward()
        opt.step()
        opt.zero_grad()


def digest(model):
    params = zero.full_parameters(model)
    h = hashlib.sha256()
    for name in sorted(params):
        h.update(params[name].contiguous().numpy().tobytes())
    return h.hexdigest()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model, opt = wrap(HYBRID)
    train(model, opt, 0, rank)
    folder = zero.save_checkpoint(model, args.dir)
    train(model, opt, K, rank)
    digests = {"uninterrupted": digest(model), "folder": os.path.basename(folder),
               "files": sorted(f for f in os.listdir(folder) if f.endswith(".bin"))}
    for name, config in (("hybrid", HYBRID), ("stage3", STAGE3)):
        model, opt = wrap(config)
        zero.load_checkpoint(model, args.dir)
        train(model, opt, K, rank)
        digests[name] = digest(model)
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump(digests, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
