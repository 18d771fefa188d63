"""What zero.wrap left on a model, for the modules that read it
(_checkpoint.py, _memory.py, _wrap.py): its state, and its engine modules'
entries while gathered. Depends on nothing but _lib, so that those modules
import it without importing each other."""

from ._lib import ZeroError


def state_of(model):
    """What zero.wrap set up for `model` (ZeroError if it did not wrap it)."""
    state = getattr(model, "_zero_state", None)
    if state is None:
        raise ZeroError("the model is not wrapped by zero.wrap")
    return state


def gathered(state):
    """Each engine module's entries while its parameters are whole: fetched
    around the yield at stage 3 (collective: every rank must iterate)."""
    for m, entries in enumerate(state.members):
        if state.stage3 is not None:
            state.stage3.fetch(m)
        try:
            yield entries
        finally:
            if state.stage3 is not None:
                state.stage3.release(m)
