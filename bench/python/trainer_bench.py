"""transformers.Trainer under DDP, under FSDP2 and under zero.hf.ZeroTrainer
at stages 0-3, same model, same processes, one run (CPU, gloo):

    torchrun --nproc_per_node=2 bench/python/trainer_bench.py --model gpt2 [--steps 12]

Builds a small GPT-2 or LLaMA-architecture model from a config (no
download), trains it with the Trainer's own AdamW, linear schedule,
clipping at 1.0 and gradient accumulation 2, and prints per framework: the
largest relative difference of its logged losses from the DDP run's, and
the median step time (a callback's timestamps around each optimizer step,
the first two left out), with the ratios zero stage 3 / FSDP2 and zero
stage 2 / DDP (goal <= 1.0). Frameworks run in alternating rounds
(--rounds) so drift on a shared machine hits all of them. With --resume,
a second command resumes stage 3's checkpoint at this process count:
    torchrun --nproc_per_node=4 bench/python/trainer_bench.py --resume DIR
prints the losses after the checkpoint beside the uninterrupted run's
(same global batch: --global_batch fixed, per-process batch derived).
Needs an optimized library (`bazel build -c opt //zero/capi:zero_engine`)."""

import argparse
import json
import os
import shutil
import statistics
import time

import torch
import transformers

from zero.hf import ZeroTrainer


def model(kind, dim, layers):
    torch.manual_seed(0)
    if kind == "gpt2":
        config = transformers.GPT2Config(n_layer=layers, n_head=4, n_embd=dim, vocab_size=512,
                                         n_positions=128, resid_pdrop=0.0, embd_pdrop=0.0,
                                         attn_pdrop=0.0)
        return transformers.GPT2LMHeadModel(config)
    config = transformers.LlamaConfig(num_hidden_layers=layers, num_attention_heads=4,
                                      num_key_value_heads=2, hidden_size=dim,
                                      intermediate_size=4 * dim, vocab_size=512,
                                      max_position_embeddings=128)
    return transformers.LlamaForCausalLM(config)


def dataset(n, length=64):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 512, (n, length), generator=g)
    return [{"input_ids": x, "labels": x.clone()} for x in ids]


class StepTimer(transformers.TrainerCallback):
    def __init__(self):
        self.times, self.start = [], None

    def on_step_begin(self, args, state, control, **kw):
        self.start = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        self.times.append(time.perf_counter() - self.start)


def train(a, out, framework, resume=None):
    world = int(os.environ["WORLD_SIZE"])
    if resume is None and int(os.environ["RANK"]) == 0:
        # A fresh run: the last one's checkpoints go (zero's saves would
        # otherwise land beside them as step-N.1, .2, ...: gigabytes over
        # many runs). No rank writes before the first save, which every
        # rank reaches only through steps this one takes part in.
        shutil.rmtree(out, ignore_errors=True)
    extra = {}
    if framework == "fsdp":
        extra = {"fsdp": "full_shard", "fsdp_config": {"fsdp_version": 2}}
    args = transformers.TrainingArguments(
        output_dir=out, max_steps=a.steps, per_device_train_batch_size=a.global_batch // world,
        gradient_accumulation_steps=2, learning_rate=1e-3, optim="adamw_torch", logging_steps=1,
        save_strategy="steps", save_steps=a.steps // 2, report_to=[], use_cpu=True, seed=0,
        ddp_backend="gloo", disable_tqdm=True, max_grad_norm=1.0, **extra)
    m, data, timer = model(a.model, a.dim, a.layers), dataset(a.steps * 2 * a.global_batch), StepTimer()
    if framework.startswith("zero"):
        config = {"zero_optimization": {"stage": int(framework[-1])}, "zero": json.loads(a.zero)}
        trainer = ZeroTrainer(model=m, args=args, train_dataset=data, callbacks=[timer],
                              zero_config=config)
    else:
        trainer = transformers.Trainer(model=m, args=args, train_dataset=data, callbacks=[timer])
    trainer.train(resume_from_checkpoint=resume)
    # A resumed Trainer's history holds the checkpoint's steps too.
    after = a.steps // 2 if resume else 0
    return ([h["loss"] for h in trainer.state.log_history if "loss" in h and h["step"] > after],
            timer.times[2:])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["gpt2", "llama"], default="gpt2")
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--global_batch", type=int, default=8)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--root", default="/tmp/trainer_bench")
    p.add_argument("--resume", help="a run's root: resume its stage 3 checkpoint here")
    p.add_argument("--zero", default="{}", help="zero's own options (the config's \"zero\" "
                   "object, JSON), e.g. '{\"fetch_granularity\": \"block\"}'")
    p.add_argument("--frameworks", default="ddp,fsdp,zero0,zero1,zero2,zero3")
    a = p.parse_args()
    rank0 = int(os.environ["RANK"]) == 0
    if a.resume:
        with open(os.path.join(a.resume, "losses.json")) as f:
            before = json.load(f)
        checkpoint = os.path.join(a.resume, "zero3", "checkpoint-%d" % (a.steps // 2))
        losses, _ = train(a, os.path.join(a.root, "resumed"), "zero3", resume=checkpoint)
        if rank0:
            for got, want in zip(losses, before["zero3"][-len(losses):]):
                print("resumed %.6f  uninterrupted %.6f  rel %.2e" % (got, want,
                                                                      abs(got / want - 1)))
            print("resumed at %s processes: %d steps, max rel %.2e" % (
                os.environ["WORLD_SIZE"], len(losses),
                max(abs(x / y - 1) for x, y in zip(losses, before["zero3"][-len(losses):]))))
        return
    frameworks = a.frameworks.split(",")
    losses, times = {}, {f: [] for f in frameworks}
    for _ in range(a.rounds):
        for f in frameworks:
            losses[f], t = train(a, os.path.join(a.root, f), f)
            times[f] += t
    if not rank0:
        return
    with open(os.path.join(a.root, "losses.json"), "w") as f:
        json.dump(losses, f)
    step = {f: statistics.median(t) for f, t in times.items()}
    print("%s dim %d layers %d, %s processes, %d steps x %d rounds"
          % (a.model, a.dim, a.layers, os.environ["WORLD_SIZE"], a.steps, a.rounds))
    for f in frameworks:
        diff = max(abs(x / y - 1) for x, y in zip(losses[f], losses["ddp"]))
        print("%-6s step %7.1f ms   loss vs ddp: max rel %.2e" % (f, 1e3 * step[f], diff))
    print("zero3 / fsdp step time %.3f   zero2 / ddp %.3f"
          % (step["zero3"] / step["fsdp"], step["zero2"] / step["ddp"]))


if __name__ == "__main__":
    main()
