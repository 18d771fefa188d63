"""Checks the footprint CLI's parameter counts for Hugging Face configs against
the models `transformers` builds from the same configs on the meta device (no
weights): sum(p.numel()) over model.parameters(), a tied head counted once.

Run by hand where torch and transformers are installed (not in the suite):
  bazel build -c opt //footprint
  python tests/footprint/hf_param_counts.py bazel-bin/footprint/footprint tests/footprint/testdata
Prints one line per config and exits 1 on any difference.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

import torch
from transformers import AutoConfig, AutoModelForCausalLM


def footprint_count(binary, config):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "run.json")
        subprocess.run([binary, "--model=" + config, "--ranks=1", "--stage=0", "--seq=0",
                        "--steps=1", "--json=" + out], check=True, capture_output=True)
        with open(out) as f:
            return json.load(f)["runs"][0]["psi"]


def main(binary, testdata):
    failed = 0
    for config in sorted(glob.glob(os.path.join(testdata, "*", "config.json"))):
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(os.path.dirname(config)))
        expected = sum(p.numel() for p in model.parameters())
        measured = footprint_count(binary, config)
        ok = expected == measured
        failed += not ok
        print(f"{'ok  ' if ok else 'DIFF'} {os.path.basename(os.path.dirname(config)):20s} "
              f"transformers {expected:>15,d}  footprint {measured:>15,d}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
