"""A process of test_errors.py's kill test, launched without torchrun (whose
agent would stop the others itself): trains under zero.wrap; the rank named
by --victim SIGKILLs itself in the middle of a step's backward. The others
must fail with a ZeroError naming it: they print it and exit with 3. With
--stop it SIGSTOPs itself instead (a hang: the test kills it afterwards)."""

import argparse
import datetime
import os
import signal
import sys

import torch
import torch.distributed as dist

import zero
from zero.examples.gpt import GPT, batch, loss_fn, param_groups


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--victim", type=int, required=True)
    parser.add_argument("--stage", type=int, default=3)
    parser.add_argument("--stop", action="store_true", help="SIGSTOP (a hang), not SIGKILL")
    parser.add_argument("--timeout", type=float, default=30, help="the process group's, in s")
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = GPT()
    model, opt = zero.wrap(model, torch.optim.AdamW(param_groups(model)),
                           {"zero_optimization": {"stage": args.stage}})
    if rank == args.victim:
        # Mid-step: once backward has produced the first gradient.
        how = signal.SIGSTOP if args.stop else signal.SIGKILL
        model.ln_f.weight.register_hook(lambda g: os.kill(os.getpid(), how))
    try:
        for step in range(5):
            x, y = batch(step, rank, 0)
            loss_fn(model(x), y).backward()
            opt.step()
            opt.zero_grad()
    except zero.ZeroError as e:
        print("rank %d: %s" % (rank, e), file=sys.stderr, flush=True)
        os._exit(3)  # the process group cannot be shut down cleanly without its peer
    print("rank %d finished" % rank, file=sys.stderr)


if __name__ == "__main__":
    main()
