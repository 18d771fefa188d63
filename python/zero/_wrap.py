"""zero.wrap: registers a PyTorch model's trainable parameters with one
engine per process and makes the user's training loop drive it.

Below stage 3 every parameter's .data aliases the engine's whole parameter
buffer for good (zero copies; the step updates it in place). Gradients go
to the engine from post-accumulate-grad hooks, which copy them (AddGrad; an
in-place gradient view is issue 10's) and drop p.grad. optimizer.step() is
the engine's Step, with the param groups' current lr; zero_grad() its
ZeroGrad. Stage 3 is _stage3.py."""

import contextlib

import torch
import torch.distributed as dist

from . import _config, _lib, _optim_state
from ._checkpoint import load_state_dict, named_state_keys
from ._engine import Engine
from ._lib import ZeroError
from ._order import device_of
from ._resilience import Resilience
from ._stage3 import Stage3
from ._weak import weak_method
from ._wrapped import gathered, state_of

_DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


class _Entry:
    __slots__ = ("index", "name", "param", "shape", "module", "group")

    def __init__(self, index, name, param, module, group):
        self.index, self.name, self.param = index, name, param
        self.shape, self.module, self.group = tuple(param.shape), module, group


def _groups_of(model_params, optimizer):
    """Param id -> its group index; errors for a parameter in two groups,
    one the model lacks, or a trainable one the optimizer lacks."""
    group_of, names = {}, {id(p): n for n, p in model_params}
    for i, group in enumerate(optimizer.param_groups):
        for p in group["params"]:
            if id(p) in group_of:
                raise ZeroError("parameter '%s' is in param groups %d and %d"
                                % (names.get(id(p), "?"), group_of[id(p)], i))
            if id(p) not in names:
                raise ZeroError("the optimizer's param group %d holds a parameter of shape %s "
                                "that is not in the model" % (i, tuple(p.shape)))
            group_of[id(p)] = i
    for name, p in model_params:
        if p.requires_grad and id(p) not in group_of:
            raise ZeroError("parameter '%s' is trainable but in no param group of the "
                            "optimizer" % name)
    return group_of


# What the engine holds of a trainable parameter: dense floating point it
# converts to the config's precision without loss. float64 would lose bits
# silently (the engine's masters are fp32).
_SERVABLE_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _refuse_unservable(model, named):
    """A ZeroError at wrap, naming the parameter, for what the engine cannot
    hold or the hooks cannot reduce, instead of a failure inside backward or
    a silent cast."""
    for module_name, module in model.named_modules():
        if getattr(module, "sparse", False) is True and any(
                p.requires_grad for p in module.parameters(recurse=False)):
            raise ZeroError("module '%s' (%s) has sparse=True: zero reduces dense gradients "
                            "only; build it with sparse=False" % (module_name or "<model>",
                                                                  type(module).__name__))
    for name, p in named:
        if not p.requires_grad:
            continue
        if p.layout != torch.strided:
            raise ZeroError("parameter '%s' is %s: zero holds dense (strided) parameters only"
                            % (name, p.layout))
        if type(p.data) is not torch.Tensor:
            raise ZeroError("parameter '%s' is a %s: zero.wrap takes a model with plain "
                            "tensors (not one already sharded)" % (name, type(p).__name__))
        if p.dtype not in _SERVABLE_DTYPES:
            raise ZeroError("parameter '%s' is %s: zero trains float32, bfloat16 and float16 "
                            "parameters (its precision comes from the config: fp32 masters, "
                            "bf16/fp16 compute); convert the model first, e.g. model.float()"
                            % (name, p.dtype))


class _State:
    """Everything wrap sets up for one model (model._zero_state)."""

    def __init__(self, model, optimizer, config, group):
        engine_cfg, options = _config.engine_config(config, _world(group))
        engine_cfg["optimizer"] = _config.optimizer_config(optimizer)
        self.optimizer_cfg = engine_cfg["optimizer"]
        self.stage = engine_cfg.get("stage", 0)
        self.offload = engine_cfg.get("offload", "none")
        self.accumulation = engine_cfg.get("gradient_accumulation_steps", 1)
        self.dtype = _DTYPES[engine_cfg.get("param_dtype", "f32")]
        named = list(model.named_parameters())
        self.named = named
        _refuse_unservable(model, named)
        group_of = _groups_of(named, optimizer)
        self._register(model, named, group_of, options.get("fetch_granularity", "module"))
        _cast_rest(model, self.by_param, self.dtype)
        _broadcast_from_rank0(model, group)
        specs = [(e.name, e.param.numel(), e.module, e.group) for e in self.entries]
        devices = _devices_of(self.entries, options.get("devices"))
        self.engine = Engine(engine_cfg, specs, devices, group,
                             options.get("ordered_reductions", True),
                             options.get("hierarchical", True), options.get("node_range"))
        for e in self.entries:
            self.engine.set_param(e.index, e.param.data)
        self.engine.order.after_engine()
        self.stage3 = Stage3(self) if self.stage == 3 else None
        if self.stage3 is None:
            for e in self.entries:
                e.param.data = self.engine.view(e.index, e.shape)
        self.lrs = [None] * len(optimizer.param_groups)
        self.param_groups = optimizer.param_groups
        self.got = set()
        self.in_backward = False
        self.pending_checkpoint = None  # save_checkpoint(blocking=False)'s, until waited
        self.process_group = group
        self.resilience = (Resilience(self, options["resilience"])
                           if "resilience" in options else None)

    def _register(self, model, named, group_of, granularity):
        """Entries in named_parameters order. Each unit that first holds a
        trainable parameter is one engine module: every module ("module",
        DeepSpeed's granularity), or every block (a child of a
        ModuleList/Sequential, or a module of a block's class) and the root
        for the rest ("block", FSDP2's usual wrapping: fewer, larger
        gathers). `uses` lists, per module, the engine modules of its
        own parameters (a tied weight's owner too); a block is a user of its
        whole unit, so it is fetched once on entry."""
        trainable = {id(p) for _, p in named if p.requires_grad}
        unit_of = _units(model, granularity)
        owner, self.uses, self.members, unit_ids = {}, {}, [], {}
        for module in model.modules():
            uses = []
            for p in module._parameters.values():
                if p is None or id(p) not in trainable:
                    continue
                if id(p) not in owner:
                    unit = unit_of[module]
                    if unit not in unit_ids:
                        unit_ids[unit] = len(self.members)
                        self.members.append([])
                    owner[id(p)] = unit_ids[unit]
                if owner[id(p)] not in uses:
                    uses.append(owner[id(p)])
            if uses:
                self.uses[module] = uses
        if granularity == "block":
            for unit, m in unit_ids.items():
                self.uses.setdefault(unit, [])
                if m not in self.uses[unit]:
                    self.uses[unit].insert(0, m)
        self.entries, self.by_param = [], {}
        for name, p in named:
            if id(p) in trainable:
                e = _Entry(len(self.entries), name, p, owner[id(p)], group_of[id(p)])
                self.entries.append(e)
                self.by_param[id(p)] = e
                self.members[e.module].append(e)

    # ---- the training loop's calls ----
    def on_grad(self, p):
        e = self.by_param[id(p)]
        self.begin_backward()
        self.engine.add_grad(e.index, p.grad)
        p.grad = None
        self.got.add(e.index)
        if self.stage3 is not None:
            self.stage3.grad_done(e)

    def begin_backward(self):
        if self.in_backward:
            return
        done = self.engine.stats()["micro_batches"]
        if done >= self.accumulation:
            # Refused here, before the engine would: its refusal fails the
            # process group (a peer may be inside a collective), this one
            # leaves everything as it was.
            raise ZeroError(
                "loss.backward(): %d backward passes since the last optimizer.step(), and "
                "gradient_accumulation_steps is %d: call optimizer.step() after every %d (or "
                "set gradient_accumulation_steps in the config)"
                % (done + 1, self.accumulation, self.accumulation))
        self.sync_lr()  # before any gradient: offload may step units during backward
        torch.autograd.Variable._execution_engine.queue_callback(self.end_backward)
        self.in_backward = True

    def abandon_backward(self):
        """A backward that raised (an OOM caught by the loop) never reached
        end_backward: zero_grad drops its gradients and this its books."""
        if not self.in_backward and not self.got:
            return
        self.in_backward = False
        self.got.clear()
        if self.stage3 is not None:
            self.stage3.end_backward()

    def check_trainable(self):
        """The engine holds the parameters that were trainable at wrap: one
        frozen since would still be stepped (weight decay, momentum), one
        unfrozen never."""
        for name, p in self.named:
            if p.requires_grad != (id(p) in self.by_param):
                raise ZeroError("parameter '%s' was %s after zero.wrap: set requires_grad "
                                "before wrapping" % (name, "unfrozen" if p.requires_grad
                                                     else "frozen"))

    def end_backward(self):
        """Parameters that got no gradient this backward contribute zeros."""
        self.in_backward = False
        for e in self.entries:
            if e.index not in self.got:
                self.engine.add_grad(e.index, torch.zeros(e.shape, dtype=self.dtype,
                                                          device=self.engine.device))
        self.got.clear()
        if self.stage3 is not None:
            self.stage3.end_backward()

    def check_step(self):
        """What optimizer.step() can tell before the engine, which would
        refuse in its own terms (modules still fetched, micro-batch counts)
        and fail the process group."""
        if self.in_backward or self.got:
            raise ZeroError("optimizer.step(): the last backward pass did not finish (it "
                            "raised): call optimizer.zero_grad() to drop its gradients, then "
                            "run forward and backward again")
        if self.stage3 is not None and any(self.stage3.count):
            raise ZeroError("optimizer.step() called inside the model's forward")
        done = self.engine.stats()["micro_batches"]
        if done == 0:
            raise ZeroError("optimizer.step() with no loss.backward() since the last step "
                            "(or zero_grad)")
        if done < self.accumulation:
            raise ZeroError("optimizer.step() after %d backward pass%s, and "
                            "gradient_accumulation_steps is %d: call loss.backward() once per "
                            "micro-batch first" % (done, "" if done == 1 else "es",
                                                   self.accumulation))

    def check_between_steps(self, what):
        if self.in_backward or self.got:
            raise ZeroError("%s: a backward pass is in progress (call it between steps)" % what)
        if self.stage3 is not None and any(self.stage3.count):
            raise ZeroError("%s: called inside the model's forward (call it between steps)"
                            % what)

    def unfetched(self):
        """Stage 3: reading requires_grad or dropping .grad inside a forward
        (Lightning's manual optimization) gathers nothing."""
        return self.stage3.unfetched() if self.stage3 is not None else contextlib.nullcontext()

    def sync_lr(self):
        for i, group in enumerate(self.param_groups):
            for key, value in self.optimizer_cfg["groups"][i].items():
                now = list(group[key]) if key == "betas" else group[key]
                if key != "lr" and now != value:
                    raise ZeroError("param group %d's '%s' changed after zero.wrap (%r -> %r): "
                                    "only lr may change" % (i, key, value, now))
            lr = float(group["lr"])
            if lr != self.lrs[i]:
                self.engine.set_lr(i, lr)
                self.lrs[i] = lr


def _units(model, granularity):
    """module -> the module that stands for its unit."""
    if granularity == "module":
        return {m: m for m in model.modules()}
    # A block: a child of a ModuleList/Sequential, or any module of the same
    # class (a block called on its own, as FSDP's transformer wrap policy).
    kinds = {type(c) for m in model.modules()
             if isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential)) for c in m.children()}
    roots = {model} | {m for m in model.modules() if type(m) in kinds}
    unit_of = {}

    def walk(module, unit):
        unit = module if module in roots else unit
        if module not in unit_of:
            unit_of[module] = unit
            for child in module.children():
                walk(child, unit)
    walk(model, model)
    return unit_of


def _devices_of(entries, spec=None):
    """Where the engine runs: the card the model's trainable parameters are
    on (model.cuda() before wrap, one card per process), else host devices;
    a devices spec given in the config must name that same device."""
    where = {e.param.device for e in entries}
    if len(where) > 1:
        raise ZeroError("the model's trainable parameters are on several devices (%s): move "
                        "the model to one device before zero.wrap"
                        % ", ".join(sorted(str(d) for d in where)))
    device = where.pop() if where else torch.device("cpu")
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    if device.type not in ("cpu", "cuda"):
        raise ZeroError("the model is on %s: zero runs on CPUs and CUDA cards" % device)
    if spec is None:
        return "cuda:%d" % device.index if device.type == "cuda" else "host:1x64GiB"
    if device_of(spec) != device:
        raise ZeroError("config zero.devices '%s' is not where the model is (%s)"
                        % (spec, device))
    return spec


def _world(group):
    return dist.get_world_size(group) if dist.is_available() and dist.is_initialized() else 1


def _cast_rest(model, managed, dtype):
    """bf16/fp16: the frozen parameters and float buffers too (as DeepSpeed)."""
    if dtype == torch.float32:
        return
    for p in model.parameters():
        if id(p) not in managed and p.is_floating_point():
            p.data = p.data.to(dtype)
    for b in model.buffers():
        if b.is_floating_point():
            b.data = b.data.to(dtype)


def _signature(model):
    return [(n, tuple(t.shape), str(t.dtype), bool(t.requires_grad))
            for n, t in list(model.named_parameters()) + list(model.named_buffers())]


def _check_same_model(model, group):
    """The same parameters and buffers (names, shapes, dtypes, trainable) on
    every process, else a ZeroError on every process naming the first
    difference: the engines would otherwise disagree on their layouts."""
    mine = _signature(model)
    every = [None] * _world(group)
    dist.all_gather_object(every, mine, group=group)
    for rank, theirs in enumerate(every):
        if theirs == every[0]:
            continue
        for a, b in zip(every[0], theirs):
            if a != b:
                raise ZeroError("the model differs across processes: rank 0 has %s %s %s "
                                "(trainable %s), rank %d has %s %s %s (trainable %s)"
                                % (a + (rank,) + b))
        raise ZeroError("the model differs across processes: rank 0 has %d parameters and "
                        "buffers, rank %d has %d" % (len(every[0]), rank, len(theirs)))


def _broadcast_from_rank0(model, group):
    """As DDP: every process starts from rank 0's parameters and buffers
    (after checking that they hold the same model)."""
    if _world(group) == 1:
        return
    _check_same_model(model, group)
    src = dist.get_global_rank(group, 0) if group is not None else 0
    with torch.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            dist.broadcast(t.data, src=src, group=group)


class ZeroOptimizer(torch.optim.Optimizer):
    """The optimizer zero.wrap returns: the user's param groups (shared, so a
    scheduler on either sees the same lr), stepped by the engine."""

    def __init__(self, state, optimizer):
        super().__init__([{"params": [p for p in g["params"]]} for g in optimizer.param_groups],
                         {})
        self.param_groups = optimizer.param_groups
        self.defaults = optimizer.defaults
        self._zero_state = state

    @torch.no_grad()
    def step(self, closure=None):
        if closure is not None:
            raise ZeroError("optimizer.step(closure) is not supported")
        state = self._zero_state
        with state.unfetched():
            state.check_trainable()
        state.sync_lr()
        state.check_step()
        state.engine.step()
        if state.resilience is not None:
            state.resilience.after_step()

    def zero_grad(self, set_to_none=True):
        self._zero_state.engine.zero_grad()
        self._zero_state.abandon_backward()
        with self._zero_state.unfetched():
            for e in self._zero_state.entries:
                e.param.grad = None

    def loss_scale(self):
        """fp16: multiply the loss by this before backward (1 otherwise)."""
        return self._zero_state.engine.loss_scale()

    def state_dict(self):
        """This process's pieces of the optimizer state in torch's form
        (_optim_state.py says which); not collective."""
        return _optim_state.state_dict(self._zero_state, self.param_groups)

    def full_state_dict(self):
        """Collective: the whole optimizer state on every process, as torch's
        own optimizer would return it (plus the fp32 masters)."""
        return _optim_state.full_state_dict(self._zero_state, self.param_groups)

    def load_state_dict(self, state_dict):
        """Collective: a state_dict of state_dict(), full_state_dict() or a
        plain torch optimizer, at any process count its pieces allow."""
        _optim_state.load_state_dict(self._zero_state, self.param_groups, state_dict)


def wrap(model, optimizer, config=None, group=None):
    if getattr(model, "_zero_state", None) is not None:
        raise ZeroError("this model is already wrapped by zero.wrap")
    if isinstance(optimizer, ZeroOptimizer):
        raise ZeroError("this optimizer is already wrapped by zero.wrap")
    if isinstance(model, (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)) or \
            type(model).__name__ == "FullyShardedDataParallel":
        raise ZeroError("the model is already inside %s, which reduces the gradients itself: "
                        "pass the module it wraps (model.module)" % type(model).__name__)
    for name, p in model.named_parameters():
        if getattr(p, "_zero_wrapped", False):
            raise ZeroError("parameter '%s' already belongs to a model wrapped by zero.wrap (a "
                            "submodule or parent of this one): wrap one model once" % name)
    _lib.warn_if_unoptimized()
    own_group = group is None and _world(None) > 1
    if own_group:
        # The engine's collectives run on its own thread, interleaved with
        # the program's: on one group gloo or NCCL could pair one rank's
        # engine call with another's all_reduce of the loss. The same ranks.
        group = dist.new_group(ranks=list(range(dist.get_world_size())))
    try:
        state = _State(model, optimizer, config, group)
    except BaseException:
        if own_group:
            # Nobody else holds it: left to the interpreter's exit, a gloo
            # group's threads can abort the process (pytorch#190489). The
            # error that brought us here is the one to report.
            try:
                dist.destroy_process_group(group)
            except Exception:  # noqa: BLE001
                pass
        raise
    if own_group:
        state.engine.owned_group = group
    on_grad = weak_method(state, "on_grad")  # autograd keeps it in C++
    for e in state.entries:
        e.param.register_post_accumulate_grad_hook(on_grad)
        e.param._zero_wrapped = True
    if state.stage3 is not None:
        state.stage3.install(model)
        forward = model.forward
        model.forward = lambda *a, **k: state.stage3.run_forward(forward, a, k)
    model._zero_state = state
    # Accelerate (and so transformers.Trainer) wraps a model it has not
    # prepared in DistributedDataParallel, which would reduce every gradient
    # a second time: this is its own mark for a model already set up to
    # train distributed.
    model._is_accelerate_prepared = True
    model.load_state_dict = lambda *a, **k: _load_state_dict(model, *a, **k)
    if state.resilience is not None:
        state.resilience.resume()
        model.register_forward_pre_hook(lambda module, args: state.resilience.write_user_states())
    return model, ZeroOptimizer(state, optimizer)


def resumed_step(model):
    """The optimizer steps the run had taken when zero.wrap resumed it from a
    snapshot or checkpoint ("resilience" config); 0 on a fresh start."""
    resilience = state_of(model).resilience
    return resilience.resumed_step if resilience is not None else 0


def on_resume(model, get_state, set_state):
    """The caller's own state (JSON: scheduler, data position) in every
    snapshot: get_state() is saved with each, set_state(value) is called now
    with the resumed run's value if there is one. Needs a "resilience"
    config section."""
    resilience = state_of(model).resilience
    if resilience is None:
        raise ZeroError("zero.on_resume needs a \"resilience\" config section")
    resilience.on_resume(get_state, set_state)


def _load_state_dict(model, state_dict, strict=True, assign=False):
    """model.load_state_dict on a wrapped model: the parameters live in the
    engine (bf16 or offloaded: its fp32 masters), where torch's copy_ would
    not reach, so it is zero.load_state_dict."""
    if assign:
        raise ZeroError("load_state_dict(assign=True) on a wrapped model would replace the "
                        "parameters the engine holds: load without assign")
    keys = named_state_keys(model)
    load_state_dict(model, state_dict, strict)
    return torch.nn.modules.module._IncompatibleKeys(
        sorted(keys - set(state_dict)), sorted(set(state_dict) - keys))


def full_parameters(model):
    """{name: fp32 copy} of every parameter the engine holds, whole. Collective
    at stage 3 (every rank must call it), where it gathers module by module."""
    out = {}
    for entries in gathered(state_of(model)):
        for e in entries:
            out[e.name] = e.param.data.detach().to(torch.float32, copy=True)
    return out
