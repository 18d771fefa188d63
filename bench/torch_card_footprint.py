#!/usr/bin/env python3
"""Card check: the footprint's peak against what PyTorch allocates (issue 44).

    python3 bench/torch_card_footprint.py path/to/footprint

For a small LLaMA and GPT-2 from `transformers` (fp32, sdpa, seq 512,
micro-batch 2), trains two steps of plain PyTorch AdamW on cuda:0 (gradients
kept between steps, as the engine keeps its buffers) and compares
torch.cuda.max_memory_allocated over the second step with the footprint's
peak_allocated_bytes for the same config.json at one rank, stage 0, fp32,
--kernels=transformers --attention=sdpa (parameters, gradients, optimizer
state and one micro-batch's activations). One line per model:
"PASS footprint_peak_<family>: ..." within 5%, else FAIL.

Without torch, transformers, a card or the binary: SKIP lines and exit 77.
The card image has torch but may lack transformers (pure Python: carry it
with .device, or run with --allow-skip=footprint_peak_llama,
footprint_peak_gpt2). Not yet run on a card. No CPU mode: a CPU has no allocator that counts
bytes, and what autograd saves (the CPU's measure, which
tests/python/test_footprint_hf.py holds per layer) leaves out the
transients at the peak (the logits beside their log-softmax), which is
what this check is for.
"""
import json
import os
import subprocess
import sys
import tempfile

SKIPPED = 77
TOLERANCE = 0.05
SEQ, BATCH = 512, 2


def configs(transformers):
    common = dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8, vocab_size=8192)
    return {
        "llama": transformers.LlamaConfig(num_key_value_heads=4, intermediate_size=1376,
                                          max_position_embeddings=SEQ, **common),
        "gpt2": transformers.GPT2Config(n_embd=512, n_layer=4, n_head=8, vocab_size=8192,
                                        n_positions=SEQ),
    }


def footprint_peak(binary, config):
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "m"))
        path = os.path.join(tmp, "m", "config.json")
        with open(path, "w") as f:
            f.write(config.to_json_string())
        out = os.path.join(tmp, "run.json")
        args = [binary, "--model=" + path, "--ranks=1", "--stage=0", "--steps=1",
                "--precision=fp32", f"--seq={SEQ}", f"--micro_batch={BATCH}",
                "--kernels=transformers", "--attention=sdpa", "--backend=gpu",
                "--json=" + out]
        proc = subprocess.run(args, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError("%s: %s" % (" ".join(args), proc.stderr.strip()))
        with open(out) as f:
            return json.load(f)["runs"][0]["peak_allocated_bytes"]


def one_step(torch, model, optimizer, device):
    ids = torch.randint(0, model.config.vocab_size, (BATCH, SEQ), device=device)
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=False)  # kept, as the engine's gradients are


def measured_on_card(torch, model, optimizer):
    one_step(torch, model, optimizer, "cuda")  # creates the AdamW state
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    one_step(torch, model, optimizer, "cuda")
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated()


def main(argv):
    args = argv[1:]
    names = ["footprint_peak_llama", "footprint_peak_gpt2"]

    def skip_all(why):
        for name in names:
            print("SKIP %s: %s" % (name, why))
        return SKIPPED

    try:
        import torch
        import transformers
    except ImportError as e:
        return skip_all("no torch or transformers (%s)" % e)
    if not args or not os.path.isfile(args[0]):
        return skip_all("no footprint binary (carry .device after card_check.sh build)")
    if not torch.cuda.is_available():
        return skip_all("no card")
    failed = False
    for family, config in configs(transformers).items():
        name = "footprint_peak_" + family
        torch.manual_seed(0)
        config._attn_implementation = "sdpa"
        model = transformers.AutoModelForCausalLM.from_config(config).to("cuda").train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
        measured = measured_on_card(torch, model, optimizer)
        predicted = footprint_peak(args[0], config)
        ratio = predicted / measured
        line = "%s: footprint %.1f MiB / max_memory_allocated %.1f MiB = %.3f (goal within %.0f%%)" % (
            name, predicted / 2**20, measured / 2**20, ratio, TOLERANCE * 100)
        ok = abs(ratio - 1) <= TOLERANCE
        failed |= not ok
        print(("PASS " if ok else "FAIL ") + line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
