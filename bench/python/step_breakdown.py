"""Where a training step's time goes, for bench/python/peers_bench.py: the
CPU time of this process's threads by role, and (zero only) the main
thread's time inside the engine's calls.

On a CPU run every framework's work is some thread's CPU time: the main
thread runs forward, backward and the optimizer (and, for DDP and FSDP2,
their hooks and copies); gloo's threads run its collectives; zero's own
threads are named (base/thread_name.h): zero-stream runs its streams' work
(on host devices: collectives through the node's range, copies into
buckets, the update), zero-comm its process-group collectives, zero-cpu
the CPU pool's share of reductions and the update. The main thread's wall
time minus its CPU time is what it spent off the CPU: waiting (for a
collective, a gather, a reduction) or preempted by the other processes'
threads on a machine with fewer cores than threads.

Thread CPU times come from /proc/self/task/*/schedstat (nanoseconds)."""

import os

ROLES = ("main", "gloo", "zero-stream", "zero-comm", "zero-cpu", "other")
CALLS = (("add_grad", ("add_grad",)), ("gathers", ("fetch", "wait_fetched", "release")),
         ("step call", ("step",)))


def _role(tid, name):
    if tid == os.getpid():
        return "main"
    if "gloo" in name:
        return "gloo"
    return name if name in ROLES else "other"


def thread_cpu():
    """{tid: (role, CPU seconds so far)} of this process's live threads."""
    seconds = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/comm" % tid) as f:
                name = f.read().strip()
            with open("/proc/self/task/%s/schedstat" % tid) as f:
                on_cpu_ns = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # the thread ended while we read
        seconds[int(tid)] = (_role(int(tid), name), on_cpu_ns * 1e-9)
    return seconds


def _by_role(before, after):
    """CPU seconds between two thread_cpu() readings, summed by role. A
    thread started between them counts whole; one that ended (an earlier
    framework's, collected meanwhile) is left out."""
    seconds = dict.fromkeys(ROLES, 0.0)
    for tid, (role, now) in after.items():
        seconds[role] += now - before.get(tid, (role, 0.0))[1]
    return seconds


def engine_calls(model):
    """zero.time_summary's seconds, grouped as CALLS (empty for the peers)."""
    import zero
    try:
        calls = zero.time_summary(model)
    except zero.ZeroError:
        return {}
    return {label: sum(calls.get(k, {}).get("seconds", 0.0) for k in kinds)
            for label, kinds in CALLS}


class Meter:
    """Brackets the timed steps: start() before the first, stop() after the
    last, then per_step() gives ms per step of each column."""

    def __init__(self, model):
        self.model = model
        self.cpu = self.calls = None
        self.steps = 0
        self.wall = 0.0

    def start(self):
        self.cpu, self.calls = thread_cpu(), engine_calls(self.model)

    def stop(self, steps, wall):
        cpu, calls = thread_cpu(), engine_calls(self.model)
        self.cpu = _by_role(self.cpu, cpu)
        self.calls = {k: calls[k] - self.calls.get(k, 0.0) for k in calls}
        self.steps, self.wall = steps, wall

    def per_step(self):
        ms = 1e3 / max(self.steps, 1)
        row = {"wall": self.wall * ms, "main off-cpu": (self.wall - self.cpu["main"]) * ms}
        row.update({"cpu " + k: v * ms for k, v in self.cpu.items()})
        row.update({k: v * ms for k, v in self.calls.items()})
        return row


def merge(rows):
    """Rounds' per_step rows averaged, column by column."""
    keys = {k for r in rows for k in r}
    return {k: sum(r.get(k, 0.0) for r in rows) / len(rows) for k in keys}


COLUMNS = (("wall", "wall"), ("main off-cpu", "off-cpu"), ("cpu main", "main"),
           ("cpu gloo", "gloo"), ("cpu zero-stream", "z-stream"), ("cpu zero-comm", "z-comm"),
           ("cpu zero-cpu", "z-cpu"), ("cpu other", "other"), ("add_grad", "add_grad"),
           ("gathers", "gathers"), ("step call", "step"))


def report(results):
    """The table: one row per framework, ms per step (mean over the timed
    steps, so the CPU columns add up), '-' where a column does not apply."""
    print("where the time goes, ms per step (mean of the timed loop, barriers included): "
          "off-cpu = the main thread waiting or preempted; main .. other = CPU time of the "
          "threads by role; add_grad, gathers, step = the main thread inside zero's calls")
    print("%-10s" % "" + "".join("%9s" % header for _, header in COLUMNS))
    for kind, rows in results.items():
        row = merge(rows)
        print("%-10s" % kind + "".join(
            "%9.1f" % row[c] if c in row else "%9s" % "-" for c, _ in COLUMNS))
