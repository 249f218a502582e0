"""``ft.debug``: ``ft.debug.print``, JAX's ``jax.debug.print``.

Prints concrete values from inside transforms: under ``grad``/``vjp``/``jvp`` the values of the
forward pass, under ``vmap`` one line per example (in order), under ``ft.jit`` at run time,
from the compiled code (the call is a ``debug_print`` equation: an effect that every pass
keeps and every backend runs as a host callback, never folded into a constant or merged with
another). API layer: imports tracing and ops.
"""

from __future__ import annotations

import builtins

import numpy as np

from .errors import FunctraceTypeError, where
from .ops.control import debug_print_p
from .tracing import Tracer, bind, current_trace

__all__ = ["print"]

_STATIC = (str, bool, type(None))


def print(fmt: str, *args, **kwargs) -> None:
    """Print ``fmt.format(*args, **kwargs)`` with the concrete values of the arguments, also
    inside transforms (where a plain ``print`` shows tracers).

    Arguments are arrays (traced or not) and numbers; strings, bools and None pass through to
    ``format`` as they are. Under ``ft.vmap`` it prints once per example, in order; under
    ``ft.jit`` whenever the compiled function runs (not when it is traced); under ``ft.grad``
    during the forward pass (the backward pass does not print it again, except where
    ``ft.checkpoint`` or a control-flow gradient recomputes the forward pass). Returns None.

    Example:
        >>> import numpy as np, functrace as ft, functrace.numpy as fnp
        >>> def f(x):
        ...     ft.debug.print("x = {}, sum = {s}", x, s=fnp.sum(x))
        ...     return fnp.sum(x ** 2)
        >>> _ = ft.jit(f, backend="numpy")(np.array([1.0, 2.0]))
        x = [1. 2.], sum = 3.0
    """
    if not isinstance(fmt, str):
        raise FunctraceTypeError(f"ft.debug.print takes a format string first, got "
                                 f"{type(fmt).__name__} ({where()})")
    values = list(args) + list(kwargs.values())
    if current_trace() is None and not any(isinstance(v, Tracer) for v in values):
        builtins.print(fmt.format(*args, **kwargs), flush=True)
        return
    dynamic, statics = [], []
    for i, v in enumerate(values):
        if isinstance(v, _STATIC):
            statics.append((i, v))
        elif isinstance(v, Tracer | np.ndarray | np.generic | int | float | complex):
            dynamic.append(v)
        else:
            raise FunctraceTypeError(
                f"ft.debug.print: argument {i} is a {type(v).__name__}; it prints arrays, "
                "numbers, strings, bools and None. Fix: pass the arrays of a pytree one by "
                f"one (e.g. *ft.tree_util.tree_leaves(tree)) ({where()})")
    bind(debug_print_p, *dynamic, fmt=fmt, names=tuple(kwargs), statics=tuple(statics),
         lanes=())
