"""zero against the peers a PyTorch user would pick, same model, same
processes, one run (CPU, gloo):

    torchrun --nproc_per_node=2 bench/python/peers_bench.py [--dim 256 --layers 4]
        [--model gpt2|llama|qwen2|...]

Trains the example GPT (zero/examples/gpt.py, no activation checkpointing),
or with --model a `transformers` causal LM of that type built from a config,
with the same AdamW under DistributedDataParallel, FSDP2 (fully_shard per
block, then the root), and zero.wrap at stages 2 and 3, and prints per
framework the median step time, split into forward, backward (with what
the framework waits for at its end) and optimizer.step (with what it
waits for), each phase's own median, and this rank's model-state bytes:
- persistent: parameters, gradients and optimizer state held between
  steps (storages counted once; DDP with gradient_as_bucket_view, so its
  buckets are the gradients);
- peak: persistent plus the largest set of whole parameters gathered at
  once (stage 3 and FSDP2; sampled at every module's forward and backward
  boundary for FSDP2, the pool's peak for zero).
Then where the time goes (step_breakdown.py): per framework, the main
thread's time off the CPU (waiting or preempted), the CPU time of the
threads by role (main, gloo, zero's stream, comm and CPU-pool threads), and
zero's main-thread time inside its calls (gradient hand-over, gathers and
releases, step). Then the ratios the issue asks for: zero stage 3 / FSDP2 and zero stage 2 /
DDP, for step time and peak bytes (goal <= 1.0). With --many_params 1000
the model is 1,000 parameters of 8x8 or 8 elements in blocks of 10 (FSDP2
wraps each block, zero gathers a block at a time): the step is then almost
all the frameworks' fixed cost per parameter (hooks, gathers, copies).

The frameworks run in alternating rounds (--rounds, each runs all four), and
a step time is the median over every round's timed steps: on a shared
machine the speed drifts within a run, and one framework measured early and
another late would see different machines. The library must be an
optimized build (`bazel build -c opt //zero/capi:zero_engine`): Bazel's
default steps the optimizer about ten times slower, and the figures would
compare the build mode, not the design (--allow_unoptimized to run anyway,
as the test suite does, without ratios)."""

import argparse
import statistics
import time

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel

import step_breakdown
import zero
from zero.examples.gpt import GPT, batch, loss_fn


def _storages(tensors):
    seen, total = set(), 0
    for t in tensors:
        if t is None:
            continue
        if hasattr(t, "to_local"):
            t = t.to_local()
        s = t.untyped_storage()
        if s.data_ptr() not in seen and s.nbytes() > 0:
            seen.add(s.data_ptr())
            total += s.nbytes()
    return total


def _persistent(model, opt):
    params = list(model.parameters())
    state = [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v)]
    return _storages(params + [p.grad for p in params] + state)


class _GatheredPeak:
    """FSDP2: the largest sum of unsharded parameter storages alive at any
    module boundary of forward and backward."""

    def __init__(self, model):
        self.params, self.peak = [], 0
        for module in model.modules():
            state = getattr(module, "_get_fsdp_state", None)
            group = state()._fsdp_param_group if state is not None else None
            if group is not None:
                self.params += group.fsdp_params
        for module in model.modules():
            module.register_forward_pre_hook(lambda *a: self.sample())
            module.register_forward_hook(lambda *a: self.sample())
            module.register_full_backward_hook(lambda *a: self.sample())

    def sample(self):
        total = 0
        for p in self.params:
            for t in getattr(p, "all_gather_outputs", []) or []:
                total += t.untyped_storage().nbytes()
        self.peak = max(self.peak, total)


class ManyParams(torch.nn.Module):
    """--many_params: `blocks` x 10 parameters of 8 x 8 (or 8) elements, so a
    step is almost all per-parameter cost: the wrappers' hooks, gathers and
    copies, not compute."""

    def __init__(self, vocab, blocks):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, 8)
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(5)]) for _ in range(blocks))
        self.shared = torch.nn.Linear(8, 8)  # what run() wraps beside the blocks
        self.head = torch.nn.Linear(8, vocab)

    def forward(self, tokens):
        x = self.wte(tokens)
        for block in self.blocks:
            x = x + block(x)
        return self.head(self.shared(x))


def _hf_model(args):
    """A causal LM of `transformers` by its model type (gpt2, llama, qwen2,
    ...), built from a config of the bench's sizes: random weights, no
    download, dropout off."""
    from transformers import AutoConfig, AutoModelForCausalLM
    config = AutoConfig.for_model(
        args.model, vocab_size=args.vocab, hidden_size=args.dim, num_hidden_layers=args.layers,
        num_attention_heads=args.heads, num_key_value_heads=args.heads,
        intermediate_size=4 * args.dim, max_position_embeddings=max(args.seq, 128),
        bos_token_id=0, eos_token_id=0, pad_token_id=0)
    for key in config.to_dict():
        if "drop" in key and isinstance(getattr(config, key), float):
            setattr(config, key, 0.0)
    return AutoModelForCausalLM.from_config(config)


def _model(args):
    torch.manual_seed(0)
    if args.many_params:
        return ManyParams(args.vocab, args.many_params // 10)
    if args.model != "gpt":
        return _hf_model(args)
    return GPT(vocab=args.vocab, dim=args.dim, heads=args.heads, layers=args.layers,
               seq=args.seq, checkpoint="none")


def _blocks(model):
    """What FSDP2 wraps one by one (then the root), and whose size is zero's
    bucket: the example models' blocks, a transformers model's
    _no_split_modules (what its own FSDP auto-wrap uses)."""
    if hasattr(model, "blocks"):
        return list(model.blocks) + [model.shared]
    names = set(getattr(model, "_no_split_modules", None) or ())
    blocks = [m for m in model.modules() if type(m).__name__ in names]
    if not blocks:
        raise SystemExit("%s names no _no_split_modules to wrap" % type(model).__name__)
    return blocks


def _loss(model, x, y):
    out = model(x)
    if hasattr(out, "logits"):  # transformers: the same next-token loss on its logits
        out = out.logits
    return loss_fn(out, y)


def _train(model, opt, args, rank, meter):
    """Per timed step: (total, forward, backward, step) seconds; `meter`
    (step_breakdown.Meter) brackets the timed steps. Backward
    includes what a framework waits for at its end (DDP's last all-reduce,
    FSDP2's reduce-scatters; zero's reductions overlap it and are waited for
    in step), step the optimizer and what it waits for (zero: the last
    reductions and the all-gather after the update)."""
    times = []
    for step in range(args.warmup + args.steps):
        x, y = batch(step, rank, 0, rows=args.rows, seq=args.seq, vocab=args.vocab)
        if step == args.warmup:
            meter.start()
            timed = time.perf_counter()
        dist.barrier()
        start = time.perf_counter()
        loss = _loss(model, x, y)
        forward = time.perf_counter()
        loss.backward()
        backward = time.perf_counter()
        opt.step()
        end = time.perf_counter()
        times.append((end - start, forward - start, backward - forward, end - backward))
    meter.stop(args.steps, time.perf_counter() - timed)
    return times[args.warmup:]


def run(kind, args, rank):
    model = _model(args)
    gathered = None
    if kind == "ddp":
        model = DistributedDataParallel(model, gradient_as_bucket_view=True)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    elif kind == "fsdp2":
        for block in _blocks(model):
            fully_shard(block)
        fully_shard(model)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        gathered = _GatheredPeak(model)
    else:
        stage = int(kind[4])  # zero2, zero3, zero3_gloo
        block = sum(p.numel() for p in _blocks(model)[0].parameters())
        config = {"zero_optimization": {"stage": stage, "reduce_bucket_size": block,
                                        "stage3_prefetch_bucket_size": args.prefetch_blocks * block,
                                        "stage3_param_persistence_threshold": 0},
                  "zero": {"ordered_reductions": bool(args.ordered),
                           "fetch_granularity": args.granularity}}
        if args.node_range != "auto":
            config["zero"]["node_range"] = args.node_range == "on"
        if kind.endswith("_gloo"):  # the same stage without the node's range
            config["zero"]["node_range"] = False
        model, opt = zero.wrap(model, torch.optim.AdamW(model.parameters(), lr=1e-3), config)
    meter = step_breakdown.Meter(model)
    seconds = _train(model, opt, args, rank, meter)
    if kind.startswith("zero"):
        summary = zero.memory_summary(model)
        persistent = summary["model_states"]["device_bytes"]
        peak = persistent + summary["pool"]["tags"]["gathered"]["peak"]
    else:
        persistent = _persistent(model, opt)
        peak = persistent + (gathered.peak if gathered is not None else 0)
    opt.zero_grad()
    return {"seconds": seconds, "persistent": persistent, "peak": peak,
            "breakdown": meter.per_step()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="gpt",
                        help="gpt (the example GPT) or a transformers model type built from a "
                             "config of these sizes: gpt2, llama, qwen2, mistral, ...")
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per round")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ordered", type=int, default=1,
                        help="zero's rank-ordered reductions (1, bit-exact) or gloo's own (0)")
    parser.add_argument("--granularity", default="block", choices=("block", "module"),
                        help="stage 3 gathers per block (as FSDP2 is wrapped here) or module")
    parser.add_argument("--prefetch_blocks", type=float, default=0.0,
                        help="stage 3 prefetch bucket in blocks (FSDP2 prefetches one)")
    parser.add_argument("--many_params", type=int, default=0,
                        help="instead of the GPT: this many parameters of 8x8 or 8 elements "
                             "in blocks of 10 (issue 42's hook cost: --many_params 1000)")
    parser.add_argument("--node_range", default="auto", choices=("auto", "on", "off"),
                        help="zero's collectives inside the node through the processes' shared "
                             "range (auto: where torchrun's local ranks allow), or gloo (off)")
    parser.add_argument("--with_gloo", action="store_true",
                        help="also zero stage 3 without the node's range (zero3_gloo), in the "
                             "same rounds")
    parser.add_argument("--frameworks", default="ddp,fsdp2,zero2,zero3",
                        help="which to run, of ddp, fsdp2, zero2, zero3 (ratios need both sides)")
    parser.add_argument("--allow_unoptimized", action="store_true",
                        help="run with an unoptimized library (no ratios printed)")
    args = parser.parse_args()
    build = zero.build_info()
    if not build["optimized"] and not args.allow_unoptimized:
        raise SystemExit("%s is not an optimized build: `bazel build -c opt "
                         "//zero/capi:zero_engine` (or --allow_unoptimized)" % build["path"])
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    kinds = tuple(args.frameworks.split(",")) + (("zero3_gloo",) if args.with_gloo else ())
    results = {kind: {"times": [], "breakdown": []} for kind in kinds}
    for _ in range(args.rounds):
        for kind in kinds:
            r = run(kind, args, rank)
            results[kind]["times"] += r.pop("seconds")
            results[kind]["breakdown"].append(r.pop("breakdown"))
            results[kind].update(r)
    if rank == 0:
        _report(results, world, args, build)
    dist.destroy_process_group()


def _report(results, world, args, build):
    psi = sum(p.numel() for p in _model(args).parameters())
    print("%s, %d processes, %d parameters, %d rounds x %d timed steps (median), library %s, "
          "node range %s" % (args.model, world, psi, args.rounds, args.steps,
                             "optimized" if build["optimized"] else "NOT optimized",
                             args.node_range))
    print("%-8s %10s %10s %10s %10s %14s %14s" % (
        "", "step ms", "forward", "backward", "opt.step", "persistent B", "peak B"))
    for kind, r in results.items():
        phases = [statistics.median(t[i] for t in r["times"]) for i in range(4)]
        r["seconds"] = phases[0]
        print("%-8s %10.1f %10.1f %10.1f %10.1f %14d %14d" % (
            kind, *(1e3 * p for p in phases), r["persistent"], r["peak"]))
    step_breakdown.report({kind: r["breakdown"] for kind, r in results.items()})
    if not build["optimized"]:
        print("no ratios: the library is not an optimized build")
        return
    pairs = [("zero3", "fsdp2"), ("zero2", "ddp")]
    if "zero3_gloo" in results:
        pairs += [("zero3_gloo", "fsdp2"), ("zero3", "zero3_gloo")]
    for ours, peer in pairs:
        if ours not in results or peer not in results:
            continue
        a, b = results[ours], results[peer]
        print("%s/%s: step time %.3f, peak model-state bytes %.3f, persistent %.3f"
              % (ours, peer, a["seconds"] / b["seconds"], a["peak"] / b["peak"],
                 a["persistent"] / b["persistent"]))


if __name__ == "__main__":
    main()
