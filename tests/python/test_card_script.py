"""The card check's package script (bench/torch_card_package.py) runs its
cases here on host devices (--cpu), so what a lent card runs is a script
whose logic is already tested: every case passes and says so."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_card_package_script_passes_on_host_devices():
    args = [sys.executable, str(ROOT / "bench" / "torch_card_package.py"), "--cpu"]
    if os.environ.get("ZERO_ENGINE_LIB"):
        args.insert(2, os.environ["ZERO_ENGINE_LIB"])
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert [line.split(":")[0] for line in lines] == [
        "PASS package_stage0_fp32", "PASS package_stage1_fp32", "PASS package_stage2_fp32",
        "PASS package_stage3_fp32", "PASS package_stage3_bf16"], proc.stdout
