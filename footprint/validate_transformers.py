"""Validates --kernels=transformers against the real `transformers` classes.

For each supported family, builds the model transformers builds from a
small config (AutoModelForCausalLM.from_config, bf16, CPU, training mode,
use_cache=False as the Trainer sets it), runs one forward with labels and
counts the bytes a decoder layer keeps for backward: the bytes the whole
model saves (torch.autograd.graph.saved_tensors_hooks, each storage once,
parameters and buffers left out) with 3 layers minus with 2. With gradient
checkpointing (model.gradient_checkpointing_enable()) it counts what the
forward keeps: the tensors the checkpoint saves with use_reentrant=True
(through the same hooks), and the storages still alive after the forward
with transformers' default use_reentrant=False (whose checkpoint keeps its
inputs by reference, past the hooks); both must agree. Beside it, the
footprint CLI's `layer_activations_bytes` (measured on its pool) for the
same config.json, with --kernels=transformers --backend=cpu (the CPU's
kernel choices: see footprint/activations.h) and, for the record, with the
fused accounting (before issue 44) and the card's choices.

  bazel build //footprint
  .venv/bin/python footprint/validate_transformers.py [bazel-bin/footprint/footprint]

prints a table of footprint / transformers per family, attention and
checkpointing. tests/python/test_footprint_hf.py runs the same on smaller
shapes and fails beyond 2%.
"""
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import warnings
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode

SEQ, BATCH, HIDDEN = 256, 2, 256


def families(hidden=HIDDEN):
    """Small configs of each family: 4 heads (2 KV heads where the family
    groups them), the family's own defaults otherwise."""
    common = {"hidden_size": hidden, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": hidden * 11 // 4, "vocab_size": 1000,
              "max_position_embeddings": 2048}
    ids = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
    return {
        "gpt2": {"model_type": "gpt2", "n_embd": hidden, "n_head": 4, "n_positions": 1024,
                 "vocab_size": 1000, **ids},
        "llama": dict(common, model_type="llama"),
        "mistral": dict(common, model_type="mistral"),
        "qwen2": dict(common, model_type="qwen2"),
        "phi3": dict(common, model_type="phi3", num_key_value_heads=4, **ids),
        "gemma": dict(common, model_type="gemma", num_attention_heads=8, num_key_value_heads=8,
                      head_dim=hidden // 4, **ids),
        "mixtral": dict(common, model_type="mixtral", num_local_experts=4, num_experts_per_tok=2),
        "qwen2_moe": dict(common, model_type="qwen2_moe", num_key_value_heads=4,
                          moe_intermediate_size=hidden * 11 // 8,
                          shared_expert_intermediate_size=hidden * 11 // 4, num_experts=4,
                          num_experts_per_tok=2),
        "gpt_neox": {"model_type": "gpt_neox", "hidden_size": hidden, "num_attention_heads": 4,
                     "intermediate_size": 4 * hidden, "vocab_size": 1000,
                     "max_position_embeddings": 2048, **ids},
    }


def variants(hidden=HIDDEN):
    """Paths the families' defaults leave out, with compare()'s options:
    sdpa without dropout over a fused projection (GPT-2), sdpa with a
    sliding-window mask shorter than the sequence (Mistral: grouped k and v
    repeated), eager over one sequence (GPT-NeoX reads v as a view of its
    fused projection), attention dropout in a Llama, fp32 weights."""
    f = families(hidden)
    plain = {"checkpointing": (False,)}
    return {
        "gpt2 no dropout": (dict(f["gpt2"], attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0),
                            plain),
        "mistral window": (dict(f["mistral"], sliding_window=64),
                           dict(plain, attentions=("sdpa",))),
        "gpt_neox mb 1": (f["gpt_neox"], dict(plain, batch=1)),
        "llama dropout": (dict(f["llama"], attention_dropout=0.1), plain),
        "llama fp32": (f["llama"], {"dtype": torch.float32}),
        "gpt2 fp32": (f["gpt2"], {"dtype": torch.float32}),
    }


def _layers_key(config):
    return "n_layer" if config["model_type"] == "gpt2" else "num_hidden_layers"


def _build(config, layers, attention, dtype):
    from transformers import AutoConfig, AutoModelForCausalLM

    c = dict(config, **{_layers_key(config): layers})
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**c),
                                                 attn_implementation=attention, dtype=dtype)
    return model.train()


class _Alive(TorchDispatchMode):
    """Weak references to every storage an op makes: which outlive the forward."""

    def __init__(self):
        super().__init__()
        self.refs = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.refs.append(weakref.ref(t.untyped_storage()))
        return out

    def bytes(self, own):
        # Dead storages go by reference counting; the autograd graph holds
        # no cycles through them, so no gc.collect (a fifth of a second).
        alive = {}
        for ref in self.refs:
            s = ref()
            if s is not None and s.data_ptr() not in own:
                alive[s.data_ptr()] = s.nbytes()
        return sum(alive.values())


def _keep_layers(model, layers):
    """Drops the decoder layers past `layers`: the model transformers
    builds with that many (saved bytes do not depend on the weights)."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if (isinstance(child, torch.nn.ModuleList) and len(child) > 0
                    and isinstance(child[0], GradientCheckpointingLayer)):
                setattr(module, name, child[:layers])
    key = "n_layer" if model.config.model_type == "gpt2" else "num_hidden_layers"
    setattr(model.config, key, layers)


def _forward_bytes(model, checkpointing, ids):
    """Bytes one training forward keeps for backward. checkpointing: None,
    "reentrant" (the checkpoint saves the layer's input through autograd:
    counted by the hooks) or "default" (use_reentrant=False: counted as the
    storages still alive after the forward)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if checkpointing is None:
            model.gradient_checkpointing_disable()
        else:
            model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": checkpointing == "reentrant"})
    own = {t.untyped_storage().data_ptr() for t in list(model.parameters()) + list(model.buffers())}
    saved = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in own:
            saved[ptr] = t.untyped_storage().nbytes()
        return t

    alive = _Alive() if checkpointing == "default" else contextlib.nullcontext()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), alive:
        out = model(input_ids=ids, labels=ids, use_cache=False)
    result = alive.bytes(own) if checkpointing == "default" else sum(saved.values())
    del out
    return result


def layer_bytes(config, attentions, checkpointing=(None,), seq=SEQ, batch=BATCH,
                dtype=torch.bfloat16):
    """{(attention, checkpointing): what one decoder layer keeps}: the
    model with 3 layers minus with 2, for each attn_implementation and way
    of checkpointing (see _forward_bytes)."""
    model = _build(config, 3, attentions[0], dtype)
    ids = torch.randint(3, 1000, (batch, seq))
    total = {}
    for layers, sign in ((3, 1), (2, -1)):
        _keep_layers(model, layers)
        for attention in attentions:
            model.set_attn_implementation(attention)
            for c in checkpointing:
                total[(attention, c)] = total.get((attention, c), 0) + sign * _forward_bytes(
                    model, c, ids)
    return total


def full_config(config):
    """The config.json transformers writes for `config` (3 layers)."""
    from transformers import AutoConfig

    c = AutoConfig.for_model(**dict(config, **{_layers_key(config): 3}))
    return json.loads(c.to_json_string())


def footprint_layer_bytes(binary, config, kernels, attentions, checkpointings, backend="gpu",
                          seq=SEQ, batch=BATCH, precision="bf16"):
    """{(kernels, attention, checkpointing): layer_activations_bytes} for a sweep."""
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "m"))
        path = os.path.join(tmp, "m", "config.json")
        with open(path, "w") as f:
            json.dump(full_config(config), f)
        out = os.path.join(tmp, "run.json")
        args = [binary, "--model=" + path, "--ranks=1", "--stage=0", "--steps=1",
                f"--seq={seq}", f"--micro_batch={batch}", f"--precision={precision}",
                f"--kernels={kernels}", "--attention=" + ",".join(attentions),
                "--checkpointing=" + ",".join(checkpointings), "--json=" + out]
        if backend != "gpu":
            args.append("--backend=" + backend)
        proc = subprocess.run(args, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: {proc.stderr}")
        with open(out) as f:
            runs = json.load(f)["runs"]
    return {(r["kernels"], r["attention"], r["checkpointing"]): r["layer_activations_bytes"]
            for r in runs}


def compare(binary, name, config, seq=SEQ, batch=BATCH, dtype=torch.bfloat16,
            attentions=("eager", "sdpa"), checkpointing=(False, True), gpu=True):
    """One row per attention and checkpointing: transformers' bytes and the
    footprint's (--backend=cpu; the fused accounting; with `gpu`, the
    card's choices), with their ratios."""
    precision = "fp32" if dtype == torch.float32 else "bf16"
    ckpts = ["none"] + (["full"] if True in checkpointing else [])
    kw = dict(seq=seq, batch=batch, precision=precision)
    # One sweep: fused kernels do not read --backend (sdpa is flash's layout).
    cpu = footprint_layer_bytes(binary, config, "fused,transformers", attentions, ckpts, "cpu",
                                **kw)
    card = (footprint_layer_bytes(binary, config, "transformers", attentions, ckpts, "gpu", **kw)
            if gpu else {})
    ways = [None] + (["default", "reentrant"] if True in checkpointing else [])
    real = layer_bytes(config, attentions, ways, seq=seq, batch=batch, dtype=dtype)
    rows = []
    for attention in attentions:
        for ckpt in checkpointing:
            c = "full" if ckpt else "none"
            measured = real[(attention, "default" if ckpt else None)]
            reentrant = real[(attention, "reentrant" if ckpt else None)]
            after, before = cpu[("transformers", attention, c)], cpu[("fused", attention, c)]
            row = dict(name=name, attention=attention, checkpointing=c, transformers=measured,
                       reentrant=reentrant, cpu=after, fused=before,
                       after_ratio=after / measured, before_ratio=before / measured)
            if gpu:
                row.update(gpu=card[("transformers", attention, c)],
                           gpu_ratio=card[("transformers", attention, c)] / measured)
            rows.append(row)
    return rows


def main(binary):
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    print(f"seq {SEQ}, micro-batch {BATCH}, hidden {HIDDEN}, bf16 on the CPU; bytes a layer keeps "
          "(3 layers - 2); ratios footprint / transformers")
    print("| family | attention | checkpointing | transformers | BEFORE fused | AFTER (cpu) "
          "| gpu backend |")
    print("|---|---|---|---|---|---|---|")
    cases = [(n, c, {}) for n, c in families().items()] + [(n, c, kw) for n, (c, kw) in
                                                           variants().items()]
    for name, config, kw in cases:
        for r in compare(binary, name, config, **kw):
            print(f"| {r['name']} | {r['attention']} | {r['checkpointing']} | "
                  f"{r['transformers']:,} | {r['before_ratio']:.3f} | {r['after_ratio']:.3f} | "
                  f"{r['gpu_ratio']:.3f} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bazel-bin/footprint/footprint")
