"""A small GPT-style model with what breaks naive ZeRO-3 wrappers, and a
training script for it:

    torchrun --nproc_per_node=2 -m zero.examples.gpt --stage 3 --steps 20

The model has a token embedding tied to the output head, a frozen
positional table, pre-LayerNorm blocks (causal attention, MLP), the last
block under activation checkpointing (torch.utils.checkpoint, recomputed in
backward), one block applied twice per forward, and a projection whose
weight the parent reads through torch.nn.functional instead of calling the
module."""

import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(att.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    """`checkpoint`: how the last block is checkpointed: "none", "reentrant"
    or "nonreentrant" (torch.utils.checkpoint's use_reentrant)."""

    def __init__(self, vocab=64, dim=32, heads=2, layers=2, seq=16, checkpoint="nonreentrant"):
        super().__init__()
        if checkpoint not in ("none", "reentrant", "nonreentrant"):
            raise ValueError("checkpoint=%r" % checkpoint)
        self.checkpoint = checkpoint
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Parameter(torch.randn(seq, dim) * 0.02, requires_grad=False)  # frozen
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.shared = Block(dim, heads)  # called twice per forward
        self.proj = nn.Linear(dim, dim)  # read through F.linear by the parent
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe[: tokens.shape[1]]
        for i, block in enumerate(self.blocks):
            if self.checkpoint != "none" and i == len(self.blocks) - 1:
                x = torch.utils.checkpoint.checkpoint(
                    block, x, use_reentrant=self.checkpoint == "reentrant")
            else:
                x = block(x)
        x = self.shared(self.shared(x))
        x = x + F.linear(x, self.proj.weight, self.proj.bias)
        return self.head(self.ln_f(x))


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def batch(step, rank, micro, rows=4, seq=16, vocab=64):
    """Tokens and next-token targets, from the seed alone."""
    g = torch.Generator().manual_seed(1_000_003 * step + 1009 * rank + micro)
    tokens = torch.randint(0, vocab, (rows, seq + 1), generator=g)
    return tokens[:, :-1], tokens[:, 1:]


def param_groups(model, lr=3e-3):
    """Matrices with weight decay, the rest (biases, norms) without, at a
    different lr: two groups with different settings."""
    decay = [p for n, p in model.named_parameters() if p.requires_grad and p.dim() >= 2]
    rest = [p for n, p in model.named_parameters() if p.requires_grad and p.dim() < 2]
    return [{"params": decay, "weight_decay": 0.1},
            {"params": rest, "weight_decay": 0.0, "lr": lr * 0.5}]


def train_steps(model, optimizer, steps, rank=0, scheduler=None):
    """One micro-batch a step (this rank's batch of each step number in
    `steps`): forward, backward, step, zero_grad; the losses."""
    losses = []
    for step in steps:
        tokens, targets = batch(step, rank, 0)
        loss = loss_fn(model(tokens), targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if scheduler is not None:
            scheduler.step()
        losses.append(loss.item())
    return losses


def main():
    import zero

    parser = argparse.ArgumentParser()
    parser.add_argument("--stage", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--bf16", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = GPT()
    optimizer = torch.optim.AdamW(param_groups(model), lr=3e-3, foreach=False)
    config = {"zero_optimization": {"stage": args.stage}, "bf16": {"enabled": args.bf16}}
    model, optimizer = zero.wrap(model, optimizer, config)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 / (1 + 0.05 * s))
    rank = dist.get_rank()
    for step in range(args.steps):
        loss, = train_steps(model, optimizer, [step], rank, scheduler)
        if rank == 0:
            print("step %d loss %.4f" % (step, loss), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
