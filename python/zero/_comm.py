"""The engine's collectives over the program's torch.distributed process
group (zero_collectives in zero/capi/zero_engine.h), on tensors that alias
the engine's buffers (no copies in or out).

Reductions are "ordered" by default: each rank receives every rank's chunk
(all_to_all) and adds them in rank order in fp32, rounding once, which is
exactly what the engine's local backend computes. So every stage gives the
same bits at any world size, and the C++ tests' results carry over. With
ordered=False the process group's own reductions run (gloo's or NCCL's
order, which differs between all_reduce and reduce_scatter beyond two
ranks). A callback never raises into C: an exception becomes a non-zero
return with its text (zero_comm_set_error), which the engine turns into an
error on this rank."""

import ctypes

import torch
import torch.distributed as dist

from . import _lib
from ._liveness import heartbeat


class _CardBytes:
    """`size` bytes of card memory at `ptr`, for torch.as_tensor (which
    aliases what __cuda_array_interface__ describes; it has no bf16, so the
    bytes are viewed as the dtype afterwards)."""

    def __init__(self, ptr, size):
        self.__cuda_array_interface__ = {"shape": (size,), "typestr": "|u1",
                                         "data": (ptr, False), "version": 2}


def _tensor(ptr, count, dtype, device=None, owner=None):
    """`count` elements at address `ptr` (of `device`: default host memory)
    as a tensor aliasing them. `owner` (the engine whose memory it is) stays
    alive as long as any tensor over these bytes: a parameter kept after
    its model (an un-cloned state_dict) must not outlive the memory."""
    device = device or torch.device("cpu")
    if count == 0 or not ptr:
        return torch.empty(0, dtype=dtype, device=device)
    size = count * torch.empty(0, dtype=dtype).element_size()
    if device.type == "cuda":
        card = _CardBytes(ptr, size)
        card.owner = owner
        return torch.as_tensor(card, device=device).view(dtype)
    memory = (ctypes.c_byte * size).from_address(ptr)
    memory._zero_owner = owner  # torch.frombuffer keeps `memory` with the storage
    return torch.frombuffer(memory, dtype=dtype)


def _reduce_in_order(chunks, op, out):
    """out = chunks[0] op chunks[1] op ... in fp32, rounded once into out.
    Host tensors: the library's rank-order reduction (vectorized, over the
    CPU threads, straight into `out`, no temporaries); card tensors: torch."""
    if out.device.type == "cpu" and chunks.is_contiguous() and out.is_contiguous():
        world, count = chunks.shape
        code = _lib.CODE_OF[out.dtype]
        if _lib.lib().zero_reduce_in_rank_order(chunks.data_ptr(), world, count, code, op,
                                                out.data_ptr()) != 0:
            raise _lib.ZeroError(_lib.lib().zero_engine_last_error().decode())
        return
    acc = chunks[0].to(torch.float32, copy=True)
    for chunk in chunks[1:]:
        if op == _lib.MAX:
            torch.maximum(acc, chunk.to(torch.float32), out=acc)
        else:
            acc.add_(chunk.to(torch.float32))
    if op == _lib.AVG:
        acc.div_(len(chunks))
    out.copy_(acc)


class ProcessGroupCollectives:
    """Owns the ctypes callbacks (keep it alive as long as the communicator)."""

    def __init__(self, group=None, ordered=True, device=None):
        self.group = group
        self.ordered = ordered
        self.device = device or torch.device("cpu")
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        self.aborted = None  # the reason the engine gave, if it failed
        self._scratch = {}  # dtype -> the all-to-all's landing buffer, grown as needed
        self.heartbeat = heartbeat()
        self.named_stopped = False
        self.struct = _lib.Collectives(
            _lib.ALL_GATHER(self._guard(self._all_gather)),
            _lib.REDUCE(self._guard(self._reduce_scatter)),
            _lib.REDUCE(self._guard(self._all_reduce)),
            _lib.BROADCAST(self._guard(self._broadcast)),
            _lib.BARRIER(self._guard(self._barrier)),
            _lib.ABORT(self._abort), None,
            _lib.ALL_GATHER(self._guard(self._all_to_all)))

    def _guard(self, fn):
        def call(*args):
            try:
                # On the communicator's thread, one call at a time in the
                # engine's order, once the engine's stream reached the call
                # (user and stream are not needed); the result must be in
                # place when it returns: on a card, torch's stream is waited
                # for. On host devices the engine goes on meanwhile (the
                # gradients' reduce-scatters overlap backward).
                fn(*args[:-2])
                if self.device.type == "cuda":
                    torch.cuda.current_stream(self.device).synchronize()
                return 0
            except BaseException as e:  # noqa: BLE001 - nothing may cross into C
                text = "%s: %s" % (type(e).__name__, e)
                if not self.named_stopped:  # once: it waits to see who stopped
                    self.named_stopped = True
                    stopped = self.heartbeat.stopped()
                    text = "%s (%s)" % (text, stopped) if stopped else text
                _lib.lib().zero_comm_set_error(text.encode())
                return 1
        return call

    def _tensor(self, ptr, count, dtype):
        return _tensor(ptr, count, dtype, self.device)

    def _abort(self, reason, user):
        self.aborted = reason.decode(errors="replace") if reason else "aborted"

    def _all_gather(self, send, recv, count, dtype):
        dtype = _lib.TORCH_DTYPE[dtype]
        out = self._tensor(recv, count * self.world, dtype)
        inp = self._tensor(send, count, dtype)
        if send == (recv or 0) + self.rank * count * out.element_size():
            inp = inp.clone()  # in place (NCCL's rule): the input is part of the output
        dist.all_gather_into_tensor(out, inp, group=self.group)

    def _all_to_all(self, send, recv, count, dtype):
        dtype = _lib.TORCH_DTYPE[dtype]
        inp = self._tensor(send, count * self.world, dtype)
        out = self._tensor(recv, count * self.world, dtype)
        dist.all_to_all_single(out, inp, group=self.group)

    def _reduce_scatter(self, send, recv, count, dtype, op):
        dtype = _lib.TORCH_DTYPE[dtype]
        inp, out = self._tensor(send, count * self.world, dtype), self._tensor(recv, count, dtype)
        if not self.ordered:
            return self._native(dist.reduce_scatter_tensor, out, inp.clone(), op)
        # Every rank's chunk number self.rank, in rank order.
        mine = self._landing(count * self.world, dtype)
        dist.all_to_all_single(mine, inp, group=self.group)
        _reduce_in_order(mine.view(self.world, count), op, out)

    def _all_reduce(self, send, recv, count, dtype, op):
        dtype = _lib.TORCH_DTYPE[dtype]
        inp, out = self._tensor(send, count, dtype), self._tensor(recv, count, dtype)
        if not self.ordered:
            if send != recv:
                out.copy_(inp)
            return self._native(dist.all_reduce, out, None, op)
        # A reduce-scatter over padded chunks, then an all-gather.
        chunk = -(-count // self.world)
        padded = torch.zeros(chunk * self.world, dtype=dtype, device=self.device)
        padded[:count] = inp
        mine = self._landing(chunk * self.world, dtype)
        dist.all_to_all_single(mine, padded, group=self.group)
        reduced = torch.empty(chunk, dtype=dtype, device=self.device)
        _reduce_in_order(mine.view(self.world, chunk), op, reduced)
        dist.all_gather_into_tensor(padded, reduced, group=self.group)
        out.copy_(padded[:count])

    def _landing(self, count, dtype):
        """`count` elements of scratch for the all-to-all, kept between calls:
        a fresh buffer per bucket would cost an allocation and its page
        faults every time. One at a time: the callbacks run in turn."""
        buf = self._scratch.get(dtype)
        if buf is None or buf.numel() < count:
            buf = torch.empty(count, dtype=dtype, device=self.device)
            self._scratch[dtype] = buf
        return buf[:count]

    def _native(self, fn, out, inp, op):
        ops = {_lib.SUM: dist.ReduceOp.SUM, _lib.MAX: dist.ReduceOp.MAX}
        if op == _lib.AVG:  # gloo has no AVG: sum, then divide in fp32
            args = (out, inp) if inp is not None else (out,)
            fn(*args, op=dist.ReduceOp.SUM, group=self.group)
            out.copy_(out.to(torch.float32) / self.world)
            return
        args = (out, inp) if inp is not None else (out,)
        fn(*args, op=ops[op], group=self.group)

    def _broadcast(self, send, recv, count, dtype, root):
        dtype = _lib.TORCH_DTYPE[dtype]
        out = self._tensor(recv, count, dtype)
        if self.rank == root and send != recv:
            out.copy_(self._tensor(send, count, dtype))
        src = dist.get_global_rank(self.group, root) if self.group is not None else root
        dist.broadcast(out, src=src, group=self.group)

    def _barrier(self):
        dist.barrier(group=self.group)
