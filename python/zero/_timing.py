"""zero.time_summary: where this process's training loop spent its time in
the engine's calls, for a step-time breakdown beside the peers' (bench/
python/peers_bench.py).

Per kind of call (add_grad: a gradient handed over, copied into its bucket;
fetch, wait_fetched, release: stage 3's gathers and releases; step; and
zero_grad), the number of calls and the seconds the calling thread spent in
them since wrap, waits included. What runs on the engine's own threads
(zero-stream, zero-comm, zero-cpu: base/thread_name.h) is not here: read
those threads' CPU time from /proc, as the bench does."""

from ._wrapped import state_of


def summary(model):
    """{kind: {"calls": n, "seconds": s}} for the kinds called so far."""
    calls = state_of(model).engine.call_times
    return {kind: {"calls": n, "seconds": s} for kind, (n, s) in calls.items()}
