"""The footprint's --kernels=transformers accounting against the real
`transformers` classes (footprint/validate_transformers.py, on smaller
shapes): for every supported family, eager and sdpa attention, with and
without gradient checkpointing, the bytes a decoder layer keeps for
backward, as the footprint CLI measures them on its pool with
--backend=cpu, are within 2% of what transformers saves on the CPU (3
layers minus 2, saved tensors counted once, parameters left out). Also the
paths the families' defaults leave out: sdpa over a fused projection
without dropout, a sliding-window mask, eager over one sequence, attention
dropout in a Llama, fp32 weights.

Needs torch and transformers (skipped without them) and the footprint
binary: $FOOTPRINT_BIN (./test.sh builds it), else `bazel build //footprint`
and bazel-bin/footprint/footprint."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "footprint"))
import validate_transformers as vt  # noqa: E402

SEQ, BATCH, HIDDEN = 128, 2, 128
TOLERANCE = 0.02


@pytest.fixture(scope="module")
def binary():
    if "FOOTPRINT_BIN" in os.environ:  # ./test.sh builds it beside the library
        path = Path(os.environ["FOOTPRINT_BIN"])
    else:
        # Built each time (a no-op when up to date): bazel-bin may hold a
        # stale binary, or another configuration's.
        if shutil.which("bazel") is None:
            pytest.skip("no $FOOTPRINT_BIN and no bazel to build //footprint")
        subprocess.run(["bazel", "build", "//footprint"], cwd=ROOT, check=True,
                       capture_output=True, timeout=1800)
        path = ROOT / "bazel-bin" / "footprint" / "footprint"
    assert path.exists(), path
    return str(path)


@pytest.fixture(scope="module", autouse=True)
def threads():
    before = torch.get_num_threads()
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    yield
    torch.set_num_threads(before)


def cases():
    out = [pytest.param(name, config, {}, id=name) for name, config in vt.families(HIDDEN).items()]
    out += [pytest.param(name, config, kw, id=name.replace(" ", "-"))
            for name, (config, kw) in vt.variants(HIDDEN).items()]
    return out


@pytest.mark.parametrize("name,config,kw", cases())
def test_layer_bytes_within_two_percent_of_transformers(binary, name, config, kw):
    kw = dict({"seq": SEQ, "batch": BATCH, "gpu": False}, **kw)
    rows = vt.compare(binary, name, config, **kw)
    assert len(rows) == len(kw.get("attentions", "ab")) * len(kw.get("checkpointing", "ab"))
    for r in rows:
        what = f"{name} {r['attention']} checkpointing={r['checkpointing']}: {r}"
        assert r["transformers"] > 0, what
        assert abs(r["after_ratio"] - 1) <= TOLERANCE, what
        # Checkpointing's two ways of keeping the layer's input agree.
        assert abs(r["reentrant"] / r["transformers"] - 1) <= TOLERANCE, what
    # Checkpointing keeps each layer's input: far less than without.
    for attention in ("eager", "sdpa"):
        by = {r["checkpointing"]: r["transformers"] for r in rows if r["attention"] == attention}
        if len(by) == 2:
            assert by["full"] * 4 < by["none"], (name, attention, by)


def test_fused_accounting_is_what_issue_44_found(binary):
    """The fused accounting keeps well under what transformers saves (the
    reason for --kernels=transformers): LLaMA with eager attention."""
    rows = vt.compare(binary, "llama", vt.families(HIDDEN)["llama"], seq=SEQ, batch=BATCH,
                      attentions=("eager",), checkpointing=(False,), gpu=False)
    assert rows[0]["before_ratio"] < 0.8, rows
