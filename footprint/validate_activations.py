"""Validates the footprint experiment's activation accounting against PyTorch.

For small configurations of each supported architecture, builds the same
model from torch.nn on the CPU in bf16, runs one training forward under
torch.autograd.graph.saved_tensors_hooks and counts the bytes autograd saves
for backward in the middle layer, each storage once (parameters and buffers
left out). Beside it, the footprint CLI's figure for the same config.json
(`layer_accounted_bytes`, which the experiment measures on its pool). Prints
one line per architecture and option with the difference in percent.

Run by hand where torch is installed (not in the test suite):
  bazel build //footprint
  python footprint/validate_activations.py bazel-bin/footprint/footprint

The torch models follow what footprint/activations.h accounts for with
--kernels=fused (the CLI's default, transformers, is validated against the
real classes by footprint/validate_transformers.py): the flash-attn memory
layout (q, k, v as views of (b, s, heads, d) tensors, so
the attention's output is read by the output projection as a view) and a
fused RMSNorm that saves its input and the fp32 rstd (torch.nn.RMSNorm on
the CPU is a composite that saves fp32 copies). Known CPU differences: CPU
LayerNorm keeps its mean and rstd in bf16 (CUDA: fp32), CPU dropout keeps
a bf16 mask (CUDA: bool), and CPU flash attention has no dropout (GPT-2's
attention dropout is off with flash here).
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

SEQ, BATCH = 256, 2


class FusedRMSNorm(torch.autograd.Function):
    """RMSNorm as fused kernels do it: saves the input and the fp32 rstd."""

    @staticmethod
    def forward(ctx, x, weight, eps):
        rstd = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, rstd, weight)
        return (x.float() * rstd).to(x.dtype) * weight

    @staticmethod
    def backward(ctx, grad):
        x, rstd, weight = ctx.saved_tensors
        xf, gf = x.float(), (grad * weight).float()
        n = xf * rstd
        dx = rstd * (gf - n * (gf * n).mean(-1, keepdim=True))
        return dx.to(x.dtype), (grad.float() * n).sum((0, 1)).to(weight.dtype), None


class RMSNorm(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))

    def forward(self, x):
        return FusedRMSNorm.apply(x, self.weight, 1e-6)


def norm(c, h):
    return nn.LayerNorm(h) if c["norm"] == "layer" else RMSNorm(h)


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin


class Attention(nn.Module):
    def __init__(self, c, flash):
        super().__init__()
        h, self.a, self.g, self.d = c["hidden"], c["heads"], c["kv_heads"], c["head_dim"]
        self.c, self.flash = c, flash
        q, kv = self.a * self.d, self.g * self.d
        if c["fused_qkv"]:
            self.qkv = nn.Linear(h, q + 2 * kv, bias=c["qkv_bias"])
        else:
            self.q = nn.Linear(h, q, bias=c["qkv_bias"])
            self.k = nn.Linear(h, kv, bias=c["qkv_bias"])
            self.v = nn.Linear(h, kv, bias=c["qkv_bias"])
        self.o = nn.Linear(q, h, bias=c["out_bias"])
        self.register_buffer("mask", torch.ones(SEQ, SEQ, dtype=torch.bool).triu(1), persistent=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        if self.c["fused_qkv"]:
            q, k, v = self.qkv(x).split([self.a * self.d, self.g * self.d, self.g * self.d], -1)
        else:
            q, k, v = self.q(x), self.k(x), self.v(x)
        q, k, v = (t.view(b, s, -1, self.d) for t in (q, k, v))
        if cos is not None:
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (b, heads, s, d) views
        if self.flash:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            if self.g < self.a:
                k = k.repeat_interleave(self.a // self.g, 1)
                v = v.repeat_interleave(self.a // self.g, 1)
            scores = (q @ k.transpose(-1, -2)) * (1 / math.sqrt(self.d))
            probs = scores.masked_fill(self.mask[:s, :s], float("-inf")).softmax(-1)
            if self.c["dropout"]:
                probs = F.dropout(probs, 0.1, self.training)
            out = probs @ v
        out = self.o(out.transpose(1, 2).reshape(b, s, -1))
        return F.dropout(out, 0.1, self.training) if self.c["dropout"] else out


class Mlp(nn.Module):
    def __init__(self, c, f, bias):
        super().__init__()
        h, self.c = c["hidden"], c
        if c["mlp"] == "plain":
            self.up, self.down = nn.Linear(h, f, bias=bias), nn.Linear(f, h, bias=bias)
        else:
            self.gate, self.up = nn.Linear(h, f, bias=bias), nn.Linear(h, f, bias=bias)
            self.down = nn.Linear(f, h, bias=bias)

    def forward(self, x):
        act = F.gelu if self.c["act"] == "gelu" else F.silu
        if self.c["mlp"] == "plain":
            return self.down(act(self.up(x), approximate="tanh"))
        return self.down(act(self.gate(x)) * self.up(x))


class Experts(nn.Module):
    """Mixtral's and Qwen2-MoE's sparse block, as transformers writes it."""

    def __init__(self, c):
        super().__init__()
        h, self.c = c["hidden"], c
        self.router = nn.Linear(h, c["experts"], bias=False)
        self.experts = nn.ModuleList(Mlp(c, c["expert_ff"], False) for _ in range(c["experts"]))
        if c.get("shared_ff"):
            self.shared = Mlp(c, c["shared_ff"], False)
            self.shared_gate = nn.Linear(h, 1, bias=False)

    def forward(self, x):
        b, s, h = x.shape
        x = x.view(-1, h)
        weights = F.softmax(self.router(x), dim=1, dtype=torch.float)
        weights, chosen = torch.topk(weights, self.c["top_k"], dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        weights = weights.to(x.dtype)
        out = torch.zeros_like(x)
        mask = F.one_hot(chosen, self.c["experts"]).permute(2, 1, 0)
        for e, expert in enumerate(self.experts):
            slot, token = torch.where(mask[e])
            y = expert(x[None, token].reshape(-1, h)) * weights[token, slot, None]
            out = out.index_add(0, token, y.to(x.dtype))
        if self.c.get("shared_ff"):
            out = out + torch.sigmoid(self.shared_gate(x)) * self.shared(x)
        return out.view(b, s, h)


class Layer(nn.Module):
    def __init__(self, c, flash):
        super().__init__()
        self.c = c
        self.norm1, self.attn = norm(c, c["hidden"]), Attention(c, flash)
        self.norm2 = norm(c, c["hidden"])
        self.mlp = Experts(c) if c.get("experts") else Mlp(c, c["ff"], c["mlp_bias"])

    def forward(self, x, cos, sin):
        if self.c.get("parallel"):
            return x + self.attn(self.norm1(x), cos, sin) + self.mlp(self.norm2(x))
        x = x + self.attn(self.norm1(x), cos, sin)
        y = self.mlp(self.norm2(x))
        return x + (F.dropout(y, 0.1, self.training) if self.c["dropout"] else y)


def saved_bytes_of_middle_layer(c, flash):
    torch.manual_seed(0)
    layers = nn.ModuleList(Layer(c, flash) for _ in range(c["layers"])).to(torch.bfloat16).train()
    # Parameters and buffers are not activations.
    own = {t.untyped_storage().data_ptr() for t in list(layers.parameters()) + list(layers.buffers())}
    current, per_layer, seen = [None], {}, set()
    for i, layer in enumerate(layers):
        layer.register_forward_pre_hook(lambda m, a, i=i: current.__setitem__(0, i))

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in own and ptr not in seen and current[0] is not None:
            seen.add(ptr)
            per_layer[current[0]] = per_layer.get(current[0], 0) + t.untyped_storage().nbytes()
        return t

    x = torch.randn(BATCH, SEQ, c["hidden"], dtype=torch.bfloat16, requires_grad=True)
    cos = sin = None
    if c["rotary"]:
        angle = torch.arange(SEQ)[:, None] / 10000 ** (torch.arange(c["head_dim"]) / c["head_dim"])
        cos, sin = (f(angle)[None, :, None, :].to(torch.bfloat16) for f in (torch.cos, torch.sin))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        for layer in layers:
            x = layer(x, cos, sin)
    x.float().sum().backward()  # the graph is whole
    return per_layer[c["layers"] // 2]


def base(**kw):
    c = dict(layers=4, hidden=256, heads=4, kv_heads=4, head_dim=64, ff=704, vocab=1000,
             norm="rms", mlp="gated", act="silu", qkv_bias=False, out_bias=False,
             mlp_bias=False, fused_qkv=False, dropout=False, rotary=True)
    c.update(kw)
    return c


ARCHITECTURES = {
    "gpt2": (base(norm="layer", mlp="plain", act="gelu", ff=1024, qkv_bias=True, out_bias=True,
                  mlp_bias=True, fused_qkv=True, dropout=True, rotary=False),
             {"model_type": "gpt2", "n_embd": 256, "n_layer": 4, "n_head": 4, "n_positions": 1024,
              "vocab_size": 1000}),
    "llama (GQA)": (base(kv_heads=2),
                    {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 4,
                     "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 704,
                     "vocab_size": 1000}),
    "qwen2 (biases)": (base(kv_heads=2, qkv_bias=True),
                       {"model_type": "qwen2", "hidden_size": 256, "num_hidden_layers": 4,
                        "num_attention_heads": 4, "num_key_value_heads": 2,
                        "intermediate_size": 704, "vocab_size": 1000}),
    "phi3 (fused qkv)": (base(fused_qkv=True),
                         {"model_type": "phi3", "hidden_size": 256, "num_hidden_layers": 4,
                          "num_attention_heads": 4, "intermediate_size": 704, "vocab_size": 1000}),
    "gemma (head_dim)": (base(heads=8, kv_heads=8, act="gelu"),
                         {"model_type": "gemma", "hidden_size": 256, "num_hidden_layers": 4,
                          "num_attention_heads": 8, "head_dim": 64, "intermediate_size": 704,
                          "vocab_size": 1000}),
    "gpt_neox (parallel)": (base(norm="layer", mlp="plain", act="gelu", ff=1024, qkv_bias=True,
                                 out_bias=True, mlp_bias=True, fused_qkv=True, parallel=True),
                            {"model_type": "gpt_neox", "hidden_size": 256, "num_hidden_layers": 4,
                             "num_attention_heads": 4, "intermediate_size": 1024,
                             "vocab_size": 1000}),
    "mixtral (experts)": (base(kv_heads=2, experts=4, top_k=2, expert_ff=704),
                          {"model_type": "mixtral", "hidden_size": 256, "num_hidden_layers": 4,
                           "num_attention_heads": 4, "num_key_value_heads": 2,
                           "intermediate_size": 704, "num_local_experts": 4,
                           "num_experts_per_tok": 2, "vocab_size": 1000}),
    "qwen2_moe (shared)": (base(experts=4, top_k=2, expert_ff=352, shared_ff=704, qkv_bias=True),
                           {"model_type": "qwen2_moe", "hidden_size": 256, "num_hidden_layers": 4,
                            "num_attention_heads": 4, "intermediate_size": 704,
                            "moe_intermediate_size": 352, "shared_expert_intermediate_size": 704,
                            "num_experts": 4, "num_experts_per_tok": 2, "vocab_size": 1000}),
}


def footprint_bytes(binary, config, attention):
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "m"))
        path = os.path.join(tmp, "m", "config.json")
        with open(path, "w") as f:
            json.dump(config, f)
        out = os.path.join(tmp, "run.json")
        subprocess.run([binary, "--model=" + path, "--ranks=1", "--stage=0", "--steps=1",
                        f"--seq={SEQ}", f"--micro_batch={BATCH}", "--kernels=fused",
                        "--attention=" + attention,
                        "--json=" + out], check=True, capture_output=True)
        with open(out) as f:
            return json.load(f)["runs"][0]["layer_accounted_bytes"]


def on_cuda(c, attention, torch_bytes):
    """torch_bytes with CUDA's dtypes: fp32 LayerNorm statistics (CPU: bf16)
    and 1-byte dropout masks (CPU: bf16)."""
    tokens = SEQ * BATCH
    if c["norm"] == "layer":
        torch_bytes += 2 * 2 * tokens * 2  # two LayerNorms, mean and rstd, 2 more bytes each
    if c["dropout"]:
        masks = 2 * tokens * c["hidden"]
        if attention == "eager":
            masks += c["heads"] * SEQ * tokens
        torch_bytes -= masks
    return torch_bytes


def main(binary):
    print(f"seq {SEQ}, micro-batch {BATCH}, bf16; bytes the middle layer saves for backward")
    print(f"{'architecture':22s} {'attention':9s} {'torch':>10s} {'footprint':>10s} {'diff':>8s}"
          f" {'CUDA dtypes':>12s}")
    for name, (c, config) in ARCHITECTURES.items():
        for attention in ("eager", "flash"):
            torch_bytes = saved_bytes_of_middle_layer(c, attention == "flash")
            ours = footprint_bytes(binary, config, attention)
            cuda = on_cuda(c, attention, torch_bytes)
            print(f"{name:22s} {attention:9s} {torch_bytes:10d} {ours:10d} "
                  f"{100 * (ours - torch_bytes) / torch_bytes:+7.2f}% "
                  f"{100 * (ours - cuda) / cuda:+11.2f}%")


if __name__ == "__main__":
    main(sys.argv[1])
