"""The torchrun jobs of test_hf.py: transformers.Trainer under DDP and under
zero.hf.ZeroTrainer on a tiny GPT-2 from a config, and Accelerate's prepare.
Rank 0 writes {check: value} as JSON to --out.

Phase "train" (2 processes): the Trainer's plain DDP run, ZeroTrainer at
stages 2 and 3 (losses per step, eval loss, greedy generate), the stage 3
run saving checkpoint-3 and a second ZeroTrainer resuming it, a bf16 run,
and Accelerate's prepare at stage 3. Phase "resume" (1 process): resumes
the 2-process checkpoint-3 with twice the per-process batch, so each step
sees the same samples."""

import argparse
import json
import os

import torch
import transformers
from accelerate import Accelerator

import zero
from zero.hf import ZeroTrainer

STEPS, SAVE_AT, ACCUMULATION = 6, 3, 2


def model():
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64,
                                     n_positions=32, resid_pdrop=0.0, embd_pdrop=0.0,
                                     attn_pdrop=0.0)
    return transformers.GPT2LMHeadModel(config)


def dataset(n=64, length=16):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 64, (n, length), generator=g)
    return [{"input_ids": x, "labels": x.clone()} for x in ids]


def args(out, world_batch, **extra):
    per_process = world_batch // int(os.environ["WORLD_SIZE"])
    return transformers.TrainingArguments(
        output_dir=out, max_steps=STEPS, per_device_train_batch_size=per_process,
        per_device_eval_batch_size=4, gradient_accumulation_steps=ACCUMULATION,
        learning_rate=3e-3, lr_scheduler_type="linear", optim="adamw_torch", logging_steps=1,
        save_strategy="steps", save_steps=SAVE_AT, report_to=[], use_cpu=True, seed=0,
        ddp_backend="gloo", disable_tqdm=True, dataloader_num_workers=0, **extra)


def losses(trainer, after=0):
    """The loss logged at each step past `after` (a resumed Trainer's
    history holds the checkpoint's steps too)."""
    return [h["loss"] for h in trainer.state.log_history if "loss" in h and h["step"] > after]


def run(out, stage=None, resume=None, world_batch=4, **extra):
    """One Trainer run: its per-step losses, eval loss and greedy tokens."""
    m, data = model(), dataset()
    kind = transformers.Trainer if stage is None else ZeroTrainer
    kw = {} if stage is None else {"zero_config": {"zero_optimization": {"stage": stage}}}
    trainer = kind(model=m, args=args(out, world_batch, **extra), train_dataset=data,
                   eval_dataset=data[:8], **kw)
    trainer.train(resume_from_checkpoint=resume)
    result = {"losses": losses(trainer, SAVE_AT if resume else 0), "eval": trainer.evaluate()["eval_loss"],
              "ddp": isinstance(trainer.model_wrapped, torch.nn.parallel.DistributedDataParallel)}
    prompt = data[0]["input_ids"][:4].unsqueeze(0)
    with torch.no_grad():
        result["generate"] = trainer.model.generate(prompt, max_new_tokens=4, do_sample=False,
                                                    pad_token_id=0)[0].tolist()
    return result


def accelerate_loop(stage):
    """Accelerate's prepare over zero.wrap (stage) or over the plain model
    (stage None: Accelerate's DDP); the same loop, its losses."""
    accelerator = Accelerator(cpu=True)
    m = model()
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
    if stage is not None:
        m, opt = zero.wrap(m, opt, {"zero_optimization": {"stage": stage}})
    loader = torch.utils.data.DataLoader(dataset(16), batch_size=2)
    m, opt, loader = accelerator.prepare(m, opt, loader)
    seen = []
    for batch in loader:
        loss = m(**batch).loss
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
        seen.append(loss.item())
    return {"ddp": isinstance(m, torch.nn.parallel.DistributedDataParallel), "losses": seen}


def optim_sharded(root):
    """Stage 2 on 2 processes: each rank's state_dict holds its pieces and
    resumes bit for bit; the full form is saved for phase "resume", as is
    rank 1's sharded one (which one process cannot take alone)."""
    from zero.examples.gpt import GPT, param_groups, train_steps
    torch.manual_seed(0)
    m = GPT()
    m, opt = zero.wrap(m, torch.optim.AdamW(param_groups(m), lr=3e-3),
                       {"zero_optimization": {"stage": 2}})
    rank = int(os.environ["RANK"])

    def train(steps):
        return train_steps(m, opt, steps, rank)
    train(range(2))
    sharded, full = opt.state_dict(), opt.full_state_dict()
    first = train(range(2, 4))
    opt.load_state_dict(sharded)
    again = train(range(2, 4))
    if rank == 0:
        torch.save(full, os.path.join(root, "full.pt"))
    if rank == 1:
        torch.save(sharded, os.path.join(root, "rank1.pt"))
    pieces = sum(v["exp_avg"].numel() for v in sharded["state"].values())
    whole = sum(v["exp_avg"].numel() for v in full["state"].values())
    return {"same": first == again, "pieces": pieces, "whole": whole,
            "world": sharded["zero"]["world_size"]}


def optim_full_at_one(root):
    """The 2-process full form loads into one process; rank 1's pieces alone
    are refused, changing nothing."""
    from zero.examples.gpt import GPT, param_groups
    torch.manual_seed(0)
    m = GPT()
    m, opt = zero.wrap(m, torch.optim.AdamW(param_groups(m), lr=3e-3),
                       {"zero_optimization": {"stage": 3}})
    full = torch.load(os.path.join(root, "full.pt"), weights_only=False)
    opt.load_state_dict(full)
    mine = opt.state_dict()
    same = all(torch.equal(mine["state"][i]["exp_avg_sq"], v["exp_avg_sq"].reshape(-1))
               and torch.equal(mine["zero"]["master"][i], full["zero"]["master"][i].reshape(-1))
               for i, v in full["state"].items())
    try:
        opt.load_state_dict(torch.load(os.path.join(root, "rank1.pt"), weights_only=False))
        refused = ""
    except zero.ZeroError as e:
        refused = str(e)
    unchanged = all(torch.equal(opt.state_dict()["state"][i]["exp_avg"], v["exp_avg"])
                    for i, v in mine["state"].items())
    return {"same": same, "steps": mine["zero"]["steps"], "refused": refused,
            "unchanged": unchanged}


def phase_train(root):
    # Accelerate first: AcceleratorState is one per process, and the
    # Trainer's bf16 run would leave its mixed precision in it.
    out = {"accelerate": accelerate_loop(3), "accelerate_ddp": accelerate_loop(None)}
    out["ddp"] = run(os.path.join(root, "ddp"))
    out["zero2"] = run(os.path.join(root, "zero2"), stage=2)
    out["zero3"] = run(os.path.join(root, "zero3"), stage=3)
    out["resumed"] = run(os.path.join(root, "resumed"), stage=3,
                         resume=os.path.join(root, "zero3", "checkpoint-%d" % SAVE_AT))
    out["bf16"] = run(os.path.join(root, "bf16"), stage=2, bf16=True)
    out["optim"] = optim_sharded(root)
    return out


def phase_resume(root):
    checkpoint = os.path.join(root, "zero3", "checkpoint-%d" % SAVE_AT)
    return {"resumed1": run(os.path.join(root, "resumed1"), stage=3, resume=checkpoint),
            "optim1": optim_full_at_one(root)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--phase", choices=["train", "resume"])
    parser.add_argument("--root")
    parser.add_argument("--out")
    a = parser.parse_args()
    result = (phase_train if a.phase == "train" else phase_resume)(a.root)
    if int(os.environ.get("RANK", "0")) == 0:
        with open(a.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
