"""Ordering between PyTorch's stream and the engine's (zero_engine_stream in
zero/capi/zero_engine.h).

The engine enqueues its own work (gradient copies, the step, what fetch
gathers) on its stream; the model computes on torch's current stream. Two
points order them: before_engine() before the engine reads what torch
wrote or frees what torch reads (add_grad, release, step), after_engine()
before torch reads what the engine wrote (after set_param, step), and
after_fetch(module) after a fetch, for that module's parameters only.

On cards both are event waits between the two streams (the host never
waits), and a tensor handed to the engine is recorded on its stream so
torch's caching allocator does not reuse it before the engine's copy ran.
On host devices torch's CPU ops are done when they return, and the engine's
stream is a host thread: after_engine() waits for it on the host, and
after_fetch() for the module's gather alone (zero_engine_wait_fetched): a
wait for the streams would also wait for the prefetches and gradient
reductions in flight, which is what overlaps them with the model's compute."""

import ctypes

import torch


def device_of(spec):
    """The torch device of device 0 of a devices spec ("cuda:2" -> cuda:2,
    "cuda" -> cuda:0, "host:..." -> cpu; "auto" is not resolved here: zero.wrap
    derives the spec from where the model is)."""
    if spec.startswith("cuda"):
        cards = spec[len("cuda:"):].split(",")[0] if spec.startswith("cuda:") else "0"
        return torch.device("cuda", int(cards) if cards.isdigit() else 0)
    return torch.device("cpu")


class HostOrder:
    def __init__(self, engine):
        self._engine = engine

    def before_engine(self, *tensors):
        pass

    def after_engine(self):
        self._engine.synchronize()

    def after_fetch(self, module):
        self._engine.wait_fetched(module)


class CardOrder:
    def __init__(self, engine, device):
        handle = ctypes.c_void_p()
        engine._check(engine._lib.zero_engine_stream(engine.handle, ctypes.byref(handle)),
                      "reading the engine's stream")
        self.device = device
        self.stream = torch.cuda.ExternalStream(handle.value, device=device)

    def before_engine(self, *tensors):
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        for t in tensors:
            t.record_stream(self.stream)

    def after_engine(self):
        torch.cuda.current_stream(self.device).wait_stream(self.stream)

    def after_fetch(self, module):
        self.after_engine()  # an event wait between streams: the host goes on


def order_for(engine, device):
    return CardOrder(engine, device) if device.type == "cuda" else HostOrder(engine)
