"""Hooks that autograd keeps in C++ (tensor hooks, post-accumulate-grad
hooks) must not hold the wrapper strongly: the cycle parameter -> hook ->
wrapper -> parameter passes through C++, where the garbage collector cannot
see it, and every wrapped model and engine would live forever. The model
(model._zero_state) and the optimizer keep the wrapper alive instead."""

import weakref


def weak_method(obj, method):
    """obj.method(*args) while obj lives; None after."""
    ref = weakref.ref(obj)

    def call(*args):
        target = ref()
        return None if target is None else getattr(target, method)(*args)
    return call
