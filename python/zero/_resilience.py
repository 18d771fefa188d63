"""Training that resumes by itself after a lost process (issue 38, one node
so far). With a "resilience" config section, zero.wrap

- snapshots each process's owned state (fp32 masters, optimizer state,
  step, loss scaler) every `snapshot_every` steps (default 1) as an
  asynchronous checkpoint (zero/checkpoint/checkpoint.h: a CRC per chunk,
  the manifest written once every process's file is whole, `latest`
  repointed atomically) into `snapshot_dir`, by default
  /dev/shm/zero-snapshots-<torchrun's run id>: named shared memory that
  outlives the processes on their node. The copy and the write run beside
  the next forward and backward, and rank 0's background thread publishes
  the snapshot as soon as every process's file is written
  (SaveOptions::publish_when_written), so training never waits for a
  write: a process lost after that resumes at this step; one lost within
  the write (tens of milliseconds after the step) at the step before. The
  previous snapshot is deleted when the next one starts, so the folder
  holds at most two states per process;
- writes a disk checkpoint every `checkpoint_every` steps into
  `checkpoint_dir` (the last resort, e.g. when the node itself is lost);
- resumes when the job restarts (torchrun --max-restarts): from whichever
  of the two holds the newer step, at whatever process count the restart
  has (checkpoints reshard on load); a snapshot of another model or
  optimizer is refused by name. zero.resumed_step(model) says where to
  continue; zero.on_resume(model, get_state, set_state) carries the
  caller's own state (scheduler, data position: JSON) with each snapshot;
- deletes the snapshots when the program ends without an exception (a
  process killed, or ending in an exception, leaves them to the restart).

A process that dies or hangs is an error on every other within a bounded
time (the engine's liveness checks), so the survivors exit non-zero and
torchrun restarts the group. Not yet: the buddy copy on another node
(losing a whole node falls back to the disk checkpoint), and survivors
continuing without a restart."""

import atexit
import json
import os
import re
import shutil
import sys
import time
import warnings

import torch.distributed as dist

from ._checkpoint import PendingCheckpoint, keep_only
from ._lib import ZeroError

_STEP = re.compile(r"^step-(\d+)(?:\.\d+)?$")
_failed = []  # set by the exception hook: keep the snapshots for a restart


def _except_hook(previous):
    def hook(kind, value, traceback):
        _failed.append(kind)
        previous(kind, value, traceback)
    return hook


sys.excepthook = _except_hook(sys.excepthook)


def default_snapshot_dir():
    run = os.environ.get("TORCHELASTIC_RUN_ID", "")
    if run in ("", "none"):  # a static rendezvous: the port tells jobs apart
        run = "port-%s" % os.environ.get("MASTER_PORT", "0")
    return "/dev/shm/zero-snapshots-%s" % run


def _latest(root):
    """(steps, folder) of root/latest, or None."""
    if not root:
        return None
    try:
        with open(os.path.join(root, "latest")) as f:
            name = f.read().strip()
    except OSError:
        return None
    match = _STEP.match(name)
    if match is None or not os.path.isdir(os.path.join(root, name)):
        return None
    return int(match.group(1)), os.path.join(root, name)


def _newest_snapshot(root):
    """(steps, folder) of the newest snapshot to resume from: published (a
    manifest: every process's file whole) and, when the run keeps a
    caller's state (user-step-*.json), with its caller's state written;
    else None. The one before it is still there while the newest lacks its
    caller's state (it is deleted only when the next snapshot starts)."""
    if not root or not os.path.isdir(root):
        return None
    found = []
    for name in os.listdir(root):
        match = _STEP.match(name)
        if match and os.path.exists(os.path.join(root, name, "manifest")):
            found.append((int(match.group(1)), os.path.join(root, name)))
    users = {name for name in os.listdir(root) if name.startswith("user-step-")}
    for steps, folder in sorted(found, reverse=True):
        if not users or "user-step-%d.json" % steps in users:
            return steps, folder
    return None


def _write_json(path, value):
    temp = path + ".tmp"
    with open(temp, "w") as f:
        json.dump(value, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temp, path)


class Resilience:
    """One wrapped model's snapshots, disk checkpoints and resume."""

    def __init__(self, state, options):
        self.state = state
        self.every = options["snapshot_every"]
        self.root = options["snapshot_dir"] or default_snapshot_dir()
        self.disk_root = options["checkpoint_dir"]
        self.disk_every = options["checkpoint_every"]
        if self.disk_every and not self.disk_root:
            raise ZeroError("config resilience.checkpoint_every needs resilience.checkpoint_dir")
        self.step = 0  # optimizer steps taken, resumed ones included
        self.resumed_step = 0
        self.resumed_user = None
        self.get_user = None
        self.pending = None
        self.user_due = []  # (root, steps) whose caller's state is written at the next forward
        atexit.register(self._at_exit)

    def _rank0(self):
        return self.state.engine.rank == 0

    def _agreed(self, value):
        """Rank 0's `value` on every process."""
        if not (dist.is_available() and dist.is_initialized()):
            return value
        box = [value]
        dist.broadcast_object_list(box, src=dist.get_global_rank(self.state.process_group, 0)
                                   if self.state.process_group is not None else 0,
                                   group=self.state.process_group)
        return box[0]

    def resume(self):
        """Collective, in wrap: loads the newest snapshot or disk checkpoint."""
        found = None
        if self._rank0():
            candidates = [c for c in (_newest_snapshot(self.root), _latest(self.disk_root)) if c]
            found = max(candidates) if candidates else None
        found = self._agreed(found)
        if found is None:
            return
        steps, folder = found
        try:
            self.state.engine.load(folder)
        except ZeroError as e:
            raise ZeroError("resuming from %s failed (delete it to start afresh): %s"
                            % (folder, e)) from None
        self.step = self.resumed_step = steps
        user = os.path.join(os.path.dirname(folder), "user-step-%d.json" % steps)
        if os.path.exists(user):
            with open(user) as f:
                self.resumed_user = json.load(f)

    def on_resume(self, get_state, set_state):
        self.get_user = get_state
        if self.resumed_user is not None and set_state is not None:
            set_state(self.resumed_user)

    def write_user_states(self):
        """At the forward after a save: the caller's state (as of now, the
        start of the next step: its scheduler stepped, its data advanced)
        written beside each save. A snapshot published before its caller's
        state is written is not resumed from (_newest_snapshot)."""
        for root, steps in self.user_due:
            self._save_user(root, steps)
        self.user_due = []

    def publish(self):
        """Before the next save: the snapshot in flight, published long since
        by rank 0's thread, agreed on (collective; its write overlapped a
        whole step, so this rarely waits), and the one before it deleted."""
        self.write_user_states()
        if self.pending is None:
            return
        pending, self.pending = self.pending, None
        try:
            folder = pending.wait()  # the same outcome on every process
        except ZeroError as e:
            self._give_up(e)
            return
        if self._rank0():
            self._prune(keep=os.path.basename(folder))

    def _give_up(self, error):
        """A snapshot that cannot be written (a full /dev/shm): training goes
        on with the disk checkpoints only, and says so once."""
        self.every = 0
        warnings.warn("zero: snapshots into %s stopped (%s); training goes on with %s"
                      % (self.root, error, "disk checkpoints every %d steps" % self.disk_every
                         if self.disk_every else "no checkpoints"), RuntimeWarning)

    def after_step(self):
        self.step += 1
        if self.disk_every and self.step % self.disk_every == 0:
            self.publish()
            self.state.engine.save(self.disk_root)
            self.user_due.append((self.disk_root, self.step))
        if self.every and self.step % self.every == 0:
            self.publish()
            try:
                self.state.engine.snapshot_start(self.root)
            except ZeroError as e:
                self._give_up(e)
                return
            # A save_checkpoint of the caller's waits for it first.
            self.pending = self.state.pending_checkpoint = PendingCheckpoint(self.state)
            self.user_due.append((self.root, self.step))

    def _save_user(self, root, steps):
        if self.get_user is None or not self._rank0():
            return
        os.makedirs(root, exist_ok=True)
        _write_json(os.path.join(root, "user-step-%d.json" % steps), self.get_user())

    def _prune(self, keep):
        """Every snapshot but `keep` (and older user states) goes, deleted
        off the main thread."""
        keep_only(self.root, keep, background=True)
        for name in os.listdir(self.root):
            user = re.match(r"^user-step-(\d+)\.json$", name)
            if user and int(user.group(1)) < int(_STEP.match(keep).group(1)):
                os.remove(os.path.join(self.root, name))

    def _at_exit(self):
        """A normal end deletes the snapshots: nothing is left to resume. The
        last one may still be written by the processes' background threads:
        the folder is renamed away first (atomic), so no late write lands in
        it, then removed."""
        if _failed or not self._rank0() or not os.path.isdir(self.root):
            return
        trash = "%s.deleted-%d" % (self.root, os.getpid())
        try:
            os.rename(self.root, trash)
        except OSError:
            return
        for _ in range(3):  # a write already under way may add a file once
            shutil.rmtree(trash, ignore_errors=True)
            if not os.path.exists(trash):
                return
            time.sleep(0.1)
