"""One rank's engine as a Python object over the C ABI: its devices,
communicator and engine handles, and tensors that alias its parameters."""

import atexit
import ctypes
import functools
import itertools
import json
import os
import time
import uuid
import warnings
import weakref

import torch
import torch.distributed as dist

from . import _comm, _lib, _order
from ._lib import check


# Every engine alive, for the exit hook below.
_live = weakref.WeakSet()


@atexit.register
def _settle_at_exit():
    """Before the interpreter's teardown: each engine's streams drained, then
    the process group wrap made for it destroyed, while Python still runs.
    An engine in a reference cycle is otherwise destroyed by the teardown's
    last collection, when work still queued on its communication thread
    calls into an interpreter that ends the thread (its forced unwind through
    C++ aborts the process: "terminate called without an active exception"),
    and a gloo group left to the teardown can abort the same way
    (pytorch#190489). Errors are the program's business by now: ignored."""
    for engine in list(_live):
        try:
            engine.settle()
        except Exception:  # noqa: BLE001 - exiting
            pass


def ranks_per_node(group):
    """torchrun's processes per node (LOCAL_WORLD_SIZE) when the engine's
    group is the whole world and the nodes divide it; else the group's size
    (one level)."""
    world = dist.get_world_size(group)
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", world) or world)
    if world != dist.get_world_size() or per_node < 1 or world % per_node != 0:
        return world
    return per_node


# Seconds a node communicator waits for a local peer at one collective (a
# dead peer is noticed at once, by its pid).
NODE_TIMEOUT = 300.0
_node_serial = itertools.count()  # advances alike on every rank: one per engine


def node_range_plan(setting, devices_spec, group, ordered, hierarchical, config):
    """(local_rank, local_world) when this engine's memory goes in the
    node's shared range (memory/node_range.h) and its collectives inside the
    node read peers in place; None when it stays as before. `setting`: None
    (on wherever it can be: torchrun's local ranks on host devices), True
    (refused with the reason where it cannot be), False (off)."""
    if setting is False:
        return None
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "0") or 0)
    local_rank = int(os.environ.get("LOCAL_RANK", "-1") or -1)
    reason = None
    if not (dist.is_available() and dist.is_initialized()):
        reason = "no process group"
    elif not devices_spec.startswith("host"):
        reason = "the devices are '%s', not host devices (cards share through NCCL)" % devices_spec
    elif dist.get_backend(group) != "gloo":
        reason = "the process group is %s, not gloo" % dist.get_backend(group)
    elif local_world < 2:
        reason = "no local peers (LOCAL_WORLD_SIZE is %d)" % local_world
    elif dist.get_world_size(group) != dist.get_world_size() or \
            ranks_per_node(group) != local_world:
        reason = "the engine's group is not the whole world of whole nodes"
    elif config.get("shard_group_size") not in (None, local_world):
        reason = "hybrid sharding groups of %d are not the node's %d processes" % (
            config["shard_group_size"], local_world)
    elif not ordered:
        reason = "ordered_reductions is off (the range's sums are in rank order)"
    elif not hierarchical and dist.get_world_size(group) > local_world:
        reason = "hierarchical is off, so collectives span the nodes in one ring"
    else:
        # The one test that can differ between processes: all must agree.
        mine = torch.tensor([int(dist.get_rank(group) % local_world == local_rank)])
        dist.all_reduce(mine, op=dist.ReduceOp.MIN, group=group)
        if not mine.item():
            reason = "LOCAL_RANK is not the rank modulo LOCAL_WORLD_SIZE on every process"
    if reason is None:
        return local_rank, local_world
    if setting:
        raise _lib.ZeroError("zero.node_range is on, but %s" % reason)
    return None


def _group_timeout(group):
    """Seconds the program's process groups wait for a peer (the shorter of
    the engine's group and the default group, whose timeout the program
    set at init_process_group; zero.wrap's own group has torch's default),
    so a hung process fails the node's collectives no later than it would
    fail gloo's; NODE_TIMEOUT where torch does not say."""
    seconds = []
    for pg in (group, dist.distributed_c10d._get_default_group()):
        try:
            seconds.append(pg._get_backend(torch.device("cpu")).options._timeout.total_seconds())
        except Exception:  # noqa: BLE001 - a private API: any failure keeps the default
            pass
    return min(seconds + [NODE_TIMEOUT])


def _node_key(node, local_rank):
    """A key every process of `node` gets alike and no other range has:
    made by the node's first process, passed through the group's store."""
    # The store outlives a torchrun restart: a key from the attempt before
    # must never be read again.
    name = "zero/node_range/%s/%d/%d" % (os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"),
                                         node, next(_node_serial))
    store = dist.distributed_c10d._get_default_store()
    if local_rank == 0:
        store.set(name, uuid.uuid4().hex)
    return store.get(name).decode()


def _timed(kind):
    """Counts each call of the decorated engine call that returns, with the
    calling thread's seconds in it, in Engine.call_times[kind] (what
    zero.time_summary reports; about 0.2 us per call)."""
    def decorate(method):
        @functools.wraps(method)
        def timed(self, *args):
            start = time.perf_counter()
            result = method(self, *args)
            entry = self.call_times.setdefault(kind, [0, 0.0])
            entry[0] += 1
            entry[1] += time.perf_counter() - start
            return result
        return timed
    return decorate


class Engine:
    """Owns the three handles; close() (or garbage collection) frees them."""

    def __init__(self, config, specs, devices_spec, group=None, ordered=True,
                 hierarchical=True, node_range=None):
        lib = _lib.lib()
        self._lib = lib
        self.handle = self.comm = self.devices = None
        self.call_times = {}  # kind -> [calls, seconds]: see _timed
        self.collectives = None
        self.node = node_range_plan(node_range, devices_spec, group, ordered, hierarchical,
                                    config)
        self.devices = self._create_devices(devices_spec, group, node_range)
        self.device = _order.device_of(devices_spec)
        comm = ctypes.c_void_p()
        self.levels = []  # a hierarchical communicator's two (collectives, handle, group)
        self.owned_groups = []  # groups made here, destroyed at exit
        if dist.is_available() and dist.is_initialized():
            self.collectives = _comm.ProcessGroupCollectives(group, ordered, self.device)
            self.rank, self.world = self.collectives.rank, self.collectives.world
            per_node = ranks_per_node(group) if hierarchical else self.world
            # Hybrid sharding: the groups are its shard groups, whatever the nodes.
            per_node = config.get("shard_group_size") or per_node
            if per_node < self.world:
                comm = self._hierarchical(per_node, ordered)
            elif self.node is not None:
                comm = self._node_comm()
            else:
                check(lib.zero_comm_create(ctypes.byref(comm), self.rank, self.world,
                                           ctypes.byref(self.collectives.struct)),
                      "creating the communicator")
        else:
            self.rank, self.world = 0, 1
            check(lib.zero_comm_create_local(ctypes.byref(comm), 1, 60.0, self.devices),
                  "creating the communicator")
        self.comm = comm
        names = [s[0].encode() for s in specs]  # kept alive through the call
        array = (_lib.ParamSpec * len(specs))(
            *[_lib.ParamSpec(n, numel, module, group_)
              for n, (_, numel, module, group_) in zip(names, specs)])
        handle = ctypes.c_void_p()
        self._check(lib.zero_engine_create(ctypes.byref(handle), json.dumps(config).encode(),
                                           array, len(specs), self.comm, self.devices, 0),
                    "creating the engine")
        self.handle = handle
        self.order = _order.order_for(self, self.device)
        self.owned_group = None  # a group wrap made for this engine (destroyed at exit)
        _live.add(self)

    def _hierarchical(self, per_node, ordered):
        """Ranks on several nodes: a group per node and one per local rank
        across the nodes, and the engine's communicator over the two
        (zero/comm/hierarchical_communicator.h). Every rank makes every group,
        in the same order, as torch requires. With the node's range, the
        node's level is its communicator (no group traffic inside a node)."""
        lib, world, rank = self._lib, self.world, self.rank
        nodes = world // per_node
        made = [dist.new_group(list(range(n * per_node, (n + 1) * per_node)))
                for n in range(nodes)]
        made += [dist.new_group([n * per_node + local for n in range(nodes)])
                 for local in range(per_node)]
        self.owned_groups = [g for g in made if g != dist.GroupMember.NON_GROUP_MEMBER]
        handles = []
        for level, group in enumerate((made[rank // per_node], made[nodes + rank % per_node])):
            if level == 0 and self.node is not None:
                handles.append(self._node_comm())
                self.levels.append((None, handles[-1]))
                continue
            handle = ctypes.c_void_p()
            collectives = _comm.ProcessGroupCollectives(group, ordered, self.device)
            check(lib.zero_comm_create(ctypes.byref(handle), collectives.rank,
                                       collectives.world, ctypes.byref(collectives.struct)),
                  "creating a level's communicator")
            self.levels.append((collectives, handle))
            handles.append(handle)
        comm = ctypes.c_void_p()
        check(lib.zero_comm_create_hierarchical(ctypes.byref(comm), rank, per_node, handles[0],
                                                handles[1], self.devices, 0),
              "creating the hierarchical communicator")
        return comm

    def _create_devices(self, devices_spec, group, node_range):
        """This process's devices: in the node's range when self.node says
        so (auto mode falls back when no address suits every process), else
        alone."""
        lib, devices = self._lib, ctypes.c_void_p()
        if self.node is not None:
            local_rank, local_world = self.node
            key = _node_key(dist.get_rank(group) // local_world, local_rank)
            self.node_timeout = _group_timeout(group)
            rc = lib.zero_devices_create_node(ctypes.byref(devices), devices_spec.encode(),
                                              local_rank, local_world, key.encode(),
                                              self.node_timeout)
            text = lib.zero_engine_last_error().decode(errors="replace") if rc else ""
            if rc and node_range is None and "cannot reserve" in text:
                # Every process got the leader's verdict: all go on without.
                warnings.warn("zero: no node-wide range (%s); collectives inside the node go "
                              "through the process group" % text, RuntimeWarning)
                self.node = None
            else:
                check(rc, "creating devices '%s' in the node's range" % devices_spec)
        if self.node is None:
            check(lib.zero_devices_create(ctypes.byref(devices), devices_spec.encode()),
                  "creating devices '%s'" % devices_spec)
        return devices

    def _node_comm(self):
        """The node's communicator over the range (zero_comm_create_node)."""
        handle = ctypes.c_void_p()
        check(self._lib.zero_comm_create_node(ctypes.byref(handle), self.devices,
                                              self.node_timeout),
              "creating the node communicator")
        return handle

    def _check(self, rc, what):
        if rc == 0:
            return
        text = self._lib.zero_engine_last_error().decode(errors="replace")
        aborted = self.collectives.aborted if self.collectives is not None else None
        if aborted and aborted not in text:
            text = "%s (the communicator failed: %s)" % (text, aborted)
        raise _lib.ZeroError("%s failed: %s" % (what, text))

    def view(self, index, shape):
        """Parameter `index` as a tensor of `shape` aliasing the engine's memory."""
        data, numel, dtype = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_int()
        self._check(self._lib.zero_engine_param(self.handle, index, ctypes.byref(data),
                                                ctypes.byref(numel), ctypes.byref(dtype)),
                    "reading parameter %d" % index)
        return _comm._tensor(data.value, numel.value, _lib.TORCH_DTYPE[dtype.value],
                             self.device, owner=self).view(shape)

    def set_param(self, index, values):
        """From host memory (the engine copies it before returning); call
        order.after_engine() before torch reads the parameter."""
        values = values.detach().to("cpu", torch.float32).contiguous()
        self._check(self._lib.zero_engine_set_param(self.handle, index, values.data_ptr(),
                                                    values.numel()),
                    "setting parameter %d" % index)

    @_timed("fetch")
    def fetch(self, module):
        self._check(self._lib.zero_engine_fetch(self.handle, module), "fetching module %d" % module)
        self.order.after_fetch(module)

    @_timed("wait_fetched")
    def wait_fetched(self, module):
        self._check(self._lib.zero_engine_wait_fetched(self.handle, module),
                    "waiting for module %d's gather" % module)

    @_timed("release")
    def release(self, module):
        self.order.before_engine()  # torch's kernels may still read the gathered memory
        self._check(self._lib.zero_engine_release(self.handle, module),
                    "releasing module %d" % module)

    @_timed("add_grad")
    def add_grad(self, index, grad):
        code = _lib.CODE_OF.get(grad.dtype)
        if code is None:
            raise _lib.ZeroError("gradient of parameter %d is %s" % (index, grad.dtype))
        grad = grad.contiguous()
        if grad.device != self.device:
            raise _lib.ZeroError("gradient of parameter %d is on %s, the engine on %s"
                                 % (index, grad.device, self.device))
        self.order.before_engine(grad)
        self._check(self._lib.zero_engine_add_grad(self.handle, index, grad.data_ptr(),
                                                   grad.numel(), code),
                    "adding the gradient of parameter %d" % index)

    @_timed("step")
    def step(self):
        self.order.before_engine()
        self._check(self._lib.zero_engine_step(self.handle), "step")
        self.order.after_engine()

    def synchronize(self):
        self._check(self._lib.zero_engine_synchronize(self.handle), "synchronize")

    @_timed("zero_grad")
    def zero_grad(self):
        self._check(self._lib.zero_engine_zero_grad(self.handle), "zero_grad")

    def set_lr(self, group, lr):
        self._check(self._lib.zero_engine_set_lr(self.handle, group, float(lr)),
                    "setting the lr of param group %d" % group)

    def loss_scale(self):
        scale = ctypes.c_double()
        self._check(self._lib.zero_engine_loss_scale(self.handle, ctypes.byref(scale)),
                    "loss_scale")
        return scale.value

    def _text(self, call, what):
        """A string result the C ABI returns with its length (zero_engine.h):
        asks with a guess, again with the size needed if it was short."""
        needed = ctypes.c_size_t()
        buffer = ctypes.create_string_buffer(4096)
        self._check(call(buffer, len(buffer), ctypes.byref(needed)), what)
        if needed.value > len(buffer):
            buffer = ctypes.create_string_buffer(needed.value)
            self._check(call(buffer, len(buffer), ctypes.byref(needed)), what)
        return buffer.value.decode()

    def stats(self):
        text = self._text(lambda *out: self._lib.zero_engine_stats_json(self.handle, *out),
                          "stats")
        stats = json.loads(text)
        if self.node is not None:  # where the node's shared range is, and how much is backed
            stats["node_range"] = json.loads(self._text(
                lambda *out: self._lib.zero_devices_node_info(self.devices, *out), "node range"))
        return stats

    def _path(self, call, what):
        """A folder the C ABI returns from a call made once (a second would
        write a second checkpoint): the buffer holds any path the file
        system allows."""
        needed = ctypes.c_size_t()
        buffer = ctypes.create_string_buffer(1 << 16)
        self._check(call(buffer, len(buffer), ctypes.byref(needed)), what)
        return buffer.value.decode()

    def save(self, root):
        """Collective: the checkpoint folder written under `root`."""
        self.order.before_engine()
        return self._path(lambda *out: self._lib.zero_engine_save(self.handle, root.encode(), *out),
                          "saving a checkpoint under '%s'" % root)

    def save_start(self, root):
        """Collective: starts an asynchronous save under `root`."""
        self.order.before_engine()
        self._check(self._lib.zero_engine_save_start(self.handle, root.encode()),
                    "starting a checkpoint under '%s'" % root)

    def snapshot_start(self, root):
        """Collective: as save_start, but published by rank 0's background
        thread as soon as every file is written (save_wait then only agrees
        on the outcome)."""
        self.order.before_engine()
        self._check(self._lib.zero_engine_snapshot_start(self.handle, root.encode()),
                    "starting a snapshot under '%s'" % root)

    def save_wait(self):
        """Collective: the started save's folder, once written and published."""
        return self._path(lambda *out: self._lib.zero_engine_save_wait(self.handle, *out),
                          "finishing a checkpoint")

    def load(self, path):
        self.order.before_engine()
        self._check(self._lib.zero_engine_load(self.handle, path.encode()),
                    "loading the checkpoint '%s'" % path)
        self.order.after_engine()

    # ---- the owned state, parameter by parameter (_optim_state.py) ----
    def owned_piece(self, index):
        """(begin, count, planes): this rank's elements [begin, begin + count)
        of parameter `index`, flattened; planes = 1 (masters) + the
        optimizer's state buffers."""
        begin, count, planes = ctypes.c_size_t(), ctypes.c_size_t(), ctypes.c_int()
        self._check(self._lib.zero_engine_owned_piece(self.handle, index, ctypes.byref(begin),
                                                      ctypes.byref(count), ctypes.byref(planes)),
                    "finding this rank's piece of parameter %d" % index)
        return begin.value, count.value, planes.value

    def owned_read(self, index, plane, begin, count):
        """Elements [begin, begin + count) of plane `plane` (0: fp32 masters, 1 +
        i: optimizer state i) of parameter `index`, as a new fp32 CPU tensor."""
        out = torch.zeros(count, dtype=torch.float32)
        self.order.before_engine()
        self._check(self._lib.zero_engine_owned_read(self.handle, index, plane, begin, count,
                                                     out.data_ptr()),
                    "reading the optimizer state of parameter %d" % index)
        return out

    def owned_write(self, index, plane, begin, values):
        values = values.detach().to("cpu", torch.float32).contiguous().view(-1)
        self.order.before_engine()
        self._check(self._lib.zero_engine_owned_write(self.handle, index, plane, begin,
                                                      values.numel(), values.data_ptr()),
                    "writing the optimizer state of parameter %d" % index)

    def restore(self, steps):
        """Collective, after owned_write on every rank: rebuilds the
        parameters from the masters and resumes at step count `steps`."""
        self._check(self._lib.zero_engine_restore(self.handle, int(steps)),
                    "restoring the optimizer state")
        self.order.after_engine()

    def settle(self):
        """At exit: nothing left queued on the streams, the owned group gone."""
        if self.handle:
            self._lib.zero_engine_synchronize(self.handle)
        groups = self.owned_groups + [self.owned_group]
        self.owned_group, self.owned_groups = None, []
        for group in groups:
            if group is not None and dist.is_initialized() and \
                    group in dist.distributed_c10d._world.pg_map:
                dist.destroy_process_group(group)
        for collectives in [self.collectives] + [c for c, _ in self.levels]:
            if collectives is not None:
                # Our last reference to the group (destroyed above, or by the
                # program's destroy_process_group()): its C++ object and
                # threads go now, not in the teardown.
                collectives.group = None

    def close(self):
        lib = self._lib
        if self.handle:
            lib.zero_engine_destroy(self.handle)
        if self.comm:
            lib.zero_comm_destroy(self.comm)
        for _, handle in self.levels:  # emptied into self.comm: only the handles remain
            lib.zero_comm_destroy(handle)
        self.levels = []
        if self.devices:
            lib.zero_devices_destroy(self.devices)
        self.handle = self.comm = self.devices = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
