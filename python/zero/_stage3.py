"""Stage 3 in a PyTorch model: parameters are empty tensors except while the
engine has their module gathered, when they alias the gathered memory.

- Forward: each module's pre-forward hook fetches the engine modules of its
  own parameters (a tied weight's owner too) and its post-forward hook
  releases them; calls nest, so a module called twice is fine.
- A parameter used outside its module (F.linear(x, self.child.weight) in a
  parent) is caught by a TorchFunctionMode active during the wrapped
  model's forward: it fetches on first use and releases with the innermost
  running module.
- Backward: autograd must not keep pointers into memory that a release
  frees, so saved-tensor hooks replace every saved view of a gathered
  parameter by (parameter, offset, size, stride) and rebuild it in backward,
  fetching the module again if needed; a module none of whose parameters
  was saved (a first layer, whose input needs no gradient) is fetched when
  its first gradient arrives, since autograd checks the gradient against
  the parameter's shape. A module fetched for backward is released once
  all its parameters' gradients have arrived, the rest when backward ends.
- A submodule called on its own, outside the wrapped model's forward, is
  the root of its call: the mode and the saved-tensor hooks are on for it.
- Activation checkpointing (torch.utils.checkpoint, reentrant or not): its
  recomputation runs modules' forwards again inside backward, so their
  pre-forward hooks fetch again; what the recomputed forward saves points
  straight into the gathered memory (checkpointing stores it under its own
  hooks), so a module recomputed in backward is held like an unpacked one
  (until its gradients have arrived) instead of released at the end of its
  forward. The fetch-on-use mode is active during recomputation too."""

import contextlib

import torch
from torch.overrides import TorchFunctionMode

from ._weak import weak_method


class _Saved:
    __slots__ = ("entry", "offset", "size", "stride")

    def __init__(self, entry, t):
        self.entry, self.offset = entry, t.storage_offset()
        self.size, self.stride = t.size(), t.stride()


class Stage3:
    def __init__(self, state):
        self.state = state
        self.engine = state.engine
        self.members = state.members  # engine module -> its parameter entries
        self.count = [0] * len(self.members)
        self.by_storage = {}  # data_ptr of a gathered parameter's storage -> entry
        self.frames = []  # per running module (and the root): engine modules it holds
        self.held_for_backward = {}
        self.pending = [len(m) for m in self.members]
        self.busy = False  # inside fetch or release: their own tensor calls pass the mode
        self.recompute_modes = []  # a mode per module recomputed in backward
        self.roots = []  # (frames below the module, contexts) per submodule called on its own
        self.empty = torch.empty(0, dtype=state.dtype, device=state.engine.device)
        for entries in self.members:
            for e in entries:
                e.param.data = self.empty

    # ---- fetch and release, counted here; the engine sees 0 -> 1 and 1 -> 0 ----
    # A nested use (a block's children, a module called twice) costs no call
    # into the engine: on host devices each fetch is a wait for its stream.
    def fetch(self, m):
        self.count[m] += 1
        if self.count[m] == 1:
            self.engine.fetch(m)
            self.busy = True
            try:
                for e in self.members[m]:
                    view = self.engine.view(e.index, e.shape)
                    e.param.data = view
                    self.by_storage[view.untyped_storage().data_ptr()] = e
            finally:
                self.busy = False

    def release(self, m):
        self.count[m] -= 1
        if self.count[m] == 0:
            self.busy = True
            try:
                for e in self.members[m]:
                    self.by_storage.pop(e.param.data.untyped_storage().data_ptr(), None)
                    e.param.data = self.empty
            finally:
                self.busy = False
            self.engine.release(m)

    # ---- forward ----
    def install(self, model):
        arriving = weak_method(self, "_grad_arriving")  # autograd keeps it in C++
        handles = [e.param.register_hook(lambda grad, e=e: arriving(e))
                   for entries in self.members for e in entries]
        for module in model.modules():
            uses = self.state.uses.get(module)
            if not uses:
                continue
            handles.append(module.register_forward_pre_hook(
                lambda mod, args, uses=uses: self._enter(uses)))
            handles.append(module.register_forward_hook(
                lambda mod, args, out: self._leave(), always_call=True))
        return handles

    def _enter(self, uses):
        if _in_backward():
            self.state.begin_backward()
            mode = _FetchOnUse(self)
            mode.__enter__()
            self.recompute_modes.append(mode)
        elif not self.frames:
            # A submodule called on its own (model.lm_head(h)), outside the
            # wrapped forward: it becomes the root, with the mode and the
            # saved-tensor hooks, or autograd would keep pointers into the
            # gathered memory its release frees.
            self._open_root()
        self.frames.append(list(uses))
        for m in uses:
            self.fetch(m)

    def _leave(self):
        if self.recompute_modes and _in_backward():
            self.recompute_modes.pop().__exit__(None, None, None)
            for m in self.frames.pop():
                self.held_for_backward[m] = self.held_for_backward.get(m, 0) + 1
            return
        for m in reversed(self.frames.pop()):
            self.release(m)
        if self.roots and len(self.frames) == self.roots[-1][0]:
            self._close_root()

    def _open_root(self):
        contexts = [_FetchOnUse(self),
                    torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)]
        for c in contexts:
            c.__enter__()
        self.frames.append([])  # what the mode fetches for the root
        self.roots.append((len(self.frames), contexts))

    def _close_root(self):
        _, contexts = self.roots.pop()
        for m in reversed(self.frames.pop()):
            self.release(m)
        for c in reversed(contexts):
            c.__exit__(None, None, None)

    def run_forward(self, forward, args, kwargs):
        """The wrapped model's forward: a root frame, the mode, the saved-tensor hooks."""
        self.frames.append([])
        try:
            with _FetchOnUse(self), torch.autograd.graph.saved_tensors_hooks(
                    self._pack, self._unpack):
                return forward(*args, **kwargs)
        finally:
            self._leave()

    def release_root(self):
        """Between the module calls of a root frame (a Lightning
        training_step that steps the optimizer itself, after its backward):
        what the root fetched on use is released, since the engine steps
        only with every module released. The next use fetches it again."""
        if len(self.frames) == 1 and not self.roots:
            for m in reversed(self.frames[0]):
                self.release(m)
            self.frames[0].clear()

    @contextlib.contextmanager
    def unfetched(self):
        """The wrapper's own touches of the parameters (requires_grad, grad
        = None) need no data: inside a root frame the mode lets them pass
        instead of gathering every module."""
        busy, self.busy = self.busy, True
        try:
            yield
        finally:
            self.busy = busy

    def ensure(self, values):
        if self.busy:
            return
        for v in values:
            if isinstance(v, torch.nn.Parameter):
                e = self.state.by_param.get(id(v))
                if e is not None and self.count[e.module] == 0:
                    self.fetch(e.module)
                    self.frames[-1].append(e.module)
            elif isinstance(v, (list, tuple)):
                self.ensure(v)

    # ---- backward ----
    def _pack(self, t):
        if t.layout != torch.strided or t.device != self.state.engine.device:
            return t
        e = self.by_storage.get(t.untyped_storage().data_ptr())
        return t if e is None else _Saved(e, t)

    def _unpack(self, saved):
        if not isinstance(saved, _Saved):
            return saved
        e = saved.entry
        if self.count[e.module] == 0:
            self.state.begin_backward()
            self.fetch(e.module)
            self.held_for_backward[e.module] = self.held_for_backward.get(e.module, 0) + 1
        return torch.as_strided(e.param.data, saved.size, saved.stride, saved.offset)

    def _grad_arriving(self, e):
        """Before autograd accumulates a gradient, the parameter must have its
        shape: a module whose backward saved none of its parameters (a first
        layer, whose input needs no gradient) is fetched here and held until
        its gradients have arrived."""
        if self.count[e.module] == 0:
            self.state.begin_backward()
            self.fetch(e.module)
            self.held_for_backward[e.module] = self.held_for_backward.get(e.module, 0) + 1

    def grad_done(self, e):
        self.pending[e.module] -= 1
        if self.pending[e.module] == 0:
            self._release_held(e.module)

    def _release_held(self, m):
        for _ in range(self.held_for_backward.pop(m, 0)):
            self.release(m)

    def end_backward(self):
        for m in list(self.held_for_backward):
            self._release_held(m)
        self.pending = [len(m) for m in self.members]


def _in_backward():
    """True while autograd executes a backward pass on this thread (where
    checkpointing recomputes)."""
    return torch._C._current_graph_task_id() != -1


class _FetchOnUse(TorchFunctionMode):
    def __init__(self, stage3):
        super().__init__()
        self.stage3 = stage3

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.stage3.ensure(args)
        self.stage3.ensure(kwargs.values())
        return func(*args, **kwargs)
