"""A process of test_resilience.py under torchrun --max-restarts: trains the
example GPT with a "resilience" config (snapshots every step into
--snapshot_dir) and the same script on every attempt; on the first attempt
the rank --victim SIGKILLs itself in the backward of step --kill_at, once
the snapshot before that step is published. Rank 0
of the attempt that finishes writes where it started and a digest of the
final parameters to --out."""

import argparse
import hashlib
import json
import os
import signal
import time

import torch
import torch.distributed as dist

import zero
from zero.examples.gpt import GPT, batch, loss_fn, param_groups


def _kill_once_published(args):
    """SIGKILL this process once the snapshot of the steps before --kill_at
    is published (rank 0's background thread does that tens of ms after the
    step; a kill inside that window resumes a step earlier, by design)."""
    deadline = time.monotonic() + 60
    published = os.path.join(args.snapshot_dir, "step-%d" % args.kill_at, "manifest")
    while not os.path.exists(published) and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(os.getpid(), signal.SIGKILL)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--kill_at", type=int, default=-1)
    parser.add_argument("--victim", type=int, default=1)
    parser.add_argument("--stage", type=int, default=3)
    parser.add_argument("--snapshot_dir", required=True)
    parser.add_argument("--by_hand", action="store_true",
                        help="no resilience config: load --snapshot_dir's latest and its "
                             "caller state by hand (the reference for a resumed run)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    torch.manual_seed(0)
    model = GPT()
    opt = torch.optim.AdamW(param_groups(model), lr=3e-3, foreach=False)
    config = {"zero_optimization": {"stage": args.stage}}
    if not args.by_hand:
        config["resilience"] = {"snapshot_dir": args.snapshot_dir}
    model, opt = zero.wrap(model, opt, config)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 / (1 + 0.05 * step))

    def get_state():
        return {"sched": sched.state_dict(), "lrs": [g["lr"] for g in opt.param_groups]}

    def set_state(value):
        sched.load_state_dict(value["sched"])
        for group, lr in zip(opt.param_groups, value["lrs"]):
            group["lr"] = lr

    if args.by_hand:
        with open(os.path.join(args.snapshot_dir, "latest")) as f:
            start = int(f.read().strip().split("-")[1])
        zero.load_checkpoint(model, args.snapshot_dir)
        with open(os.path.join(args.snapshot_dir, "user-step-%d.json" % start)) as f:
            set_state(json.load(f))
    else:
        zero.on_resume(model, get_state, set_state)
        start = zero.resumed_step(model)
    for step in range(start, args.steps):
        x, y = batch(step, rank, 0)
        loss = loss_fn(model(x), y)
        if attempt == 0 and step == args.kill_at and rank == args.victim:
            model.ln_f.weight.register_hook(lambda g: _kill_once_published(args))
        loss.backward()
        opt.step()
        opt.zero_grad()
        sched.step()
    params = zero.full_parameters(model)
    if rank == 0:
        digest = hashlib.sha256()
        for name in sorted(params):
            digest.update(params[name].contiguous().numpy().tobytes())
        with open(args.out, "w") as f:
            json.dump({"attempt": attempt, "start": start, "digest": digest.hexdigest()}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
