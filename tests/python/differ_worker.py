"""A process of test_errors.py: rank 1 builds a wider model than rank 0;
zero.wrap must refuse on both (exit 3 with the error on stderr)."""

import sys

import torch
import torch.distributed as dist

import zero
from zero.examples.gpt import GPT, param_groups


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = GPT(dim=32 if rank == 0 else 48)
    try:
        zero.wrap(model, torch.optim.AdamW(param_groups(model)), {})
    except zero.ZeroError as e:
        print("rank %d: %s" % (rank, e), file=sys.stderr)
        code = 3
    else:
        code = 0
    # As any torch program should: left to the interpreter's exit, gloo's
    # threads can abort it ("terminate called without an active exception").
    dist.destroy_process_group()
    sys.exit(code)


if __name__ == "__main__":
    main()
