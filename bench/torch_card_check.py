#!/usr/bin/env python3
"""Card check: PyTorch trains a small MLP on memory from libzero_allocator.so.

    python3 bench/torch_card_check.py [path/to/libzero_allocator.so]

Loads the library with torch.cuda.memory.CUDAPluggableAllocator before torch
touches a card, trains a few steps (one forward pass on a side stream, so a
foreign cudaStream_t reaches the pool), then prints the pool's statistics as
the library reports them (zero_stats_json through ctypes). Prints one
PASS/FAIL line and exits 0/1; without torch, a card or the library prints a
SKIP line and exits 77, so a caller cannot take a skip for a pass
(bench/card_check.sh decides whether a skip is acceptable). A second line,
torch_oom_exception, checks in a child process that with
ZERO_ALLOCATOR_OOM=throw a request past ZERO_ALLOCATOR_CAP reaches Python as
an exception carrying the pool's RESOURCE_EXHAUSTED status (PyTorch ignores a null
return: memory/interop/README.md). A third, pool_vs_torch_alloc, times
allocate+free pairs of 1 MiB tensors through the pool and through
PyTorch's own caching allocator, each in a child process (an allocator
cannot be swapped once used): the time ratio torch / pool (informative;
no goal).
"""
import subprocess
import ctypes
import json
import os
import sys

DEFAULT_LIBRARY = "bazel-bin/memory/interop/libzero_allocator.so"
NAME = "torch_pluggable_allocator"
SKIPPED = 77  # the exit status of a skipped check (automake's convention)


def skip(why):
    print(f"SKIP {NAME}: {why}")
    return SKIPPED


def fail(why):
    print(f"FAIL {NAME}: {why}")
    return 1


def stats_json(library):
    """The library's statistics; the string is malloc'd there and freed here."""
    library.zero_stats_json.restype = ctypes.c_void_p
    raw = library.zero_stats_json()
    if not raw:
        return None
    try:
        return json.loads(ctypes.string_at(raw).decode())
    finally:
        libc = ctypes.CDLL(None)
        libc.free.argtypes = [ctypes.c_void_p]
        libc.free(raw)


def train(torch, steps=20):
    """A 3-layer MLP on fixed random data; returns (first loss, last loss)."""
    torch.manual_seed(0)
    device = torch.device("cuda", 0)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 10)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    inputs = torch.randn(2048, 256, device=device)
    targets = torch.randint(0, 10, (2048,), device=device)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        side_sum = model(inputs).float().sum()  # allocated on the side stream
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    if not torch.isfinite(side_sum):
        raise RuntimeError("side-stream forward is not finite")
    return losses[0], losses[-1]


OOM_CHILD = """
import sys, torch
allocator = torch.cuda.memory.CUDAPluggableAllocator(sys.argv[1], "zero_malloc", "zero_free")
torch.cuda.memory.change_current_allocator(allocator)
small = torch.ones(1024, device="cuda")
try:
    torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
except Exception as e:
    print("raised", type(e).__name__, str(e).splitlines()[0][:300])
    sys.exit(0 if float(small.sum()) == 1024 else 3)
sys.exit(2)
"""


def oom_check(path):
    """A request past the cap, in a child (the settings are read once)."""
    env = dict(os.environ, ZERO_ALLOCATOR_OOM="throw", ZERO_ALLOCATOR_CAP="256MiB",
               ZERO_DEVICES=os.environ.get("ZERO_DEVICES", "cuda:0"))
    child = subprocess.run([sys.executable, "-c", OOM_CHILD, path], env=env,
                           capture_output=True, text=True, timeout=120)
    out = (child.stdout + child.stderr).strip().splitlines()
    said = out[-1] if out else ""
    # The pool's refusal is an absl status carried by the exception's text:
    # under the cap it reads "RESOURCE_EXHAUSTED: limit of 256.00 MiB
    # reached: ..." (limiting_adaptor.cc), past the card's memory
    # "RESOURCE_EXHAUSTED: ... out of memory"; "out of memory" alone was
    # never in the cap's text, so this check failed by its own fault.
    if child.returncode == 0 and "RESOURCE_EXHAUSTED" in said:
        print(f"PASS torch_oom_exception: {said}")
        return True
    print(f"FAIL torch_oom_exception: exit {child.returncode}: {said}")
    return False


TIMING_CHILD = """
import sys, time, torch
if sys.argv[1] != "torch":
    allocator = torch.cuda.memory.CUDAPluggableAllocator(sys.argv[1], "zero_malloc", "zero_free")
    torch.cuda.memory.change_current_allocator(allocator)
for _ in range(100):
    torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
start = time.perf_counter()
for _ in range(20000):
    torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print((time.perf_counter() - start) / 20000)
"""


def pool_vs_torch(path):
    """Seconds per allocate+free pair, torch's allocator over ours."""
    per_pair = {}
    for who in ("torch", path):
        child = subprocess.run([sys.executable, "-c", TIMING_CHILD, who], capture_output=True,
                               text=True, timeout=120)
        try:
            per_pair[who] = float(child.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            print(f"FAIL pool_vs_torch_alloc: exit {child.returncode}: {child.stderr[-300:]}")
            return False
    print(f"PASS pool_vs_torch_alloc: torch {per_pair['torch'] * 1e6:.2f} us / pool "
          f"{per_pair[path] * 1e6:.2f} us per 1 MiB allocate+free = "
          f"{per_pair['torch'] / per_pair[path]:.2f} (informative)")
    return True


def main():
    path = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_LIBRARY)
    try:
        import torch
    except ImportError:
        return skip("torch is not installed")
    if not torch.cuda.is_available():
        return skip("no card")
    if not os.path.exists(path):
        return skip(f"{path} not built (bazel build -c opt //memory/interop:zero_allocator)")
    os.environ.setdefault("ZERO_DEVICES", "cuda")
    # Must come before the first CUDA allocation: torch cannot swap allocators later.
    allocator = torch.cuda.memory.CUDAPluggableAllocator(path, "zero_malloc", "zero_free")
    torch.cuda.memory.change_current_allocator(allocator)
    library = ctypes.CDLL(path)  # the same loaded copy torch uses
    library.zero_last_error.restype = ctypes.c_char_p
    try:
        first, last = train(torch)
    except Exception as e:  # an OOM from torch means zero_malloc said no
        return fail(f"{type(e).__name__}: {e}; last error: {library.zero_last_error().decode()}")
    stats = stats_json(library)
    if stats is None or "devices" not in stats:
        return fail(f"no statistics: {stats}")
    dev = stats["devices"][0]
    print(json.dumps({"kind": stats["kind"], "errors": stats["errors"],
                      "last_error": stats["last_error"],
                      "device0": {k: dev[k] for k in (
                          "allocated", "peak_allocated", "reserved", "peak_reserved",
                          "num_allocs", "num_frees", "num_maps")}}))
    errors = sum(v for k, v in stats["errors"].items() if k != "invalid_size")  # empty tensors
    if stats["kind"] != "cuda" or dev["num_allocs"] == 0:
        return fail(f"torch did not allocate through the pool: {stats['kind']}, {dev['num_allocs']}")
    if errors or not last < first:
        return fail(f"errors {errors}, loss {first:.4f} -> {last:.4f}")
    print(f"PASS {NAME}: loss {first:.4f} -> {last:.4f}, {dev['num_allocs']} allocations, "
          f"peak {dev['peak_allocated'] / 2**20:.1f} MiB allocated, "
          f"{dev['peak_reserved'] / 2**20:.1f} MiB reserved")
    oom_ok = oom_check(path)
    return 0 if pool_vs_torch(path) and oom_ok else 1


if __name__ == "__main__":
    sys.exit(main())
