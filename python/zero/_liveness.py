"""Which processes are still running, to name them when a collective fails.

Each process counts up a key of the process group's store from a daemon
thread every `interval` seconds. When a collective fails, the observer reads
every count twice, `stale` seconds apart: a process whose count did not move
has stopped (killed, crashed or hung outside Python), and the error names
it. Counts, not clocks, so the hosts' clocks need not agree."""

import atexit
import threading
import time

import torch.distributed as dist


_process_heartbeat = None


def heartbeat():
    """This process's Heartbeat over the default group (started once)."""
    global _process_heartbeat
    if _process_heartbeat is None:
        _process_heartbeat = Heartbeat(dist.get_rank(), dist.get_world_size())
    return _process_heartbeat


class Heartbeat:
    """Ranks are the default group's (global) ranks."""

    def __init__(self, rank, world, interval=0.25, stale=1.5):
        self.rank, self.world = rank, world
        self.interval, self.stale = interval, stale
        self.store = dist.distributed_c10d._get_default_store()
        self.stop = threading.Event()
        self.store.set(self._key(rank), "0")
        self.thread = threading.Thread(target=self._beat, name="zero-heartbeat", daemon=True)
        self.thread.start()
        # Joined before the interpreter shuts down: a daemon thread still
        # inside the store's C++ code at finalization aborts the process.
        atexit.register(self.close)

    @staticmethod
    def _key(rank):
        return "zero/heartbeat/%d" % rank

    def _beat(self):
        count = 0
        while not self.stop.wait(self.interval):
            count += 1
            try:
                self.store.set(self._key(self.rank), str(count))
            except Exception:  # noqa: BLE001 - the store's host is gone: nothing to stamp
                return

    def _counts(self):
        keys = [self._key(r) for r in range(self.world)]
        out = {}
        for r, key in enumerate(keys):
            if self.store.check([key]):
                out[r] = self.store.get(key)
        return out

    def stopped(self):
        """A sentence naming the processes that stopped ("" if none did).
        Watches the counts for `stale` seconds; if the store's host stops
        meanwhile (it may be a peer that already gave up), it judges from
        what it saw until then."""
        try:
            first = self._counts()
        except Exception as e:  # noqa: BLE001
            return "the process group's store is unreachable (%s): its host stopped" % e
        start, last, lost = time.monotonic(), first, None
        while time.monotonic() - start < self.stale:
            time.sleep(self.interval)
            try:
                last = self._counts()
            except Exception as e:  # noqa: BLE001
                lost = e
                break
        parts = []
        if time.monotonic() - start >= 4 * self.interval:  # long enough to tell
            gone = [r for r in range(self.world)
                    if r != self.rank and r in first and last.get(r) == first[r]]
            if gone:
                parts.append("rank%s %s stopped responding" % ("s" if len(gone) > 1 else "",
                                                               ", ".join(map(str, gone))))
        if lost is not None:
            parts.append("the process group's store became unreachable (%s)" % lost)
        return "; ".join(parts)

    def close(self):
        self.stop.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join()
            # The store goes now, at exit, not at the interpreter's teardown,
            # where (the program's group already destroyed) this was its last
            # holder and its C++ threads could be torn down out of order.
            self.store = None
