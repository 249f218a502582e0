"""``ft.config``: process-wide switches, read where they take effect (JAX's ``jax.config``),
and ``ft.disable_jit()``.

Owns the switches and nothing else: each layer that honours one reads its attribute at the
moment it matters (one attribute read: the fast paths stay as fast as without it). Imports
nothing of functrace, so every layer may read it.

Example:
    >>> import functrace as ft
    >>> ft.config.debug_nans
    False
    >>> ft.config.update("debug_nans", True)
    >>> ft.config.debug_nans
    True
    >>> ft.config.debug_nans = False
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

__all__ = ["Config", "config", "disable_jit", "DISABLE_JIT"]

# ft.disable_jit() is scoped to a context (thread, task), not the whole process
DISABLE_JIT: contextvars.ContextVar[bool] = contextvars.ContextVar("functrace_disable_jit",
                                                                  default=False)


class Config:
    """The switches (set them as attributes, or with ``update(name, value)`` as in JAX).

    Attributes:
        debug_nans: raise ``FloatingPointError`` (a ``ft.FunctraceError``) at the first
            operation that produces a NaN from operands that had none, in a forward or a
            backward pass: the error names the op, your source line and, in a backward pass,
            the derivative rule that ran it (and where an ``inf`` operand came from). Checked
            where functrace runs ops one by one: the un-jitted transforms (``grad``, ``vjp``,
            ``jvp``, ``vmap``, ``functrace.autograd``), ``Symbol`` calls and the reference
            interpreter; ``ft.jit`` runs its traced graph on that interpreter instead of
            compiled code while the switch is on. (``functrace.numpy`` on numpy arrays outside
            transforms is numpy itself, and is not checked.) Costs a NaN scan of every result.
        enable_checks: re-check every graph with ``ft.verify`` after each simplification
            round (as ``FUNCTRACE_VERIFY=1`` does).
        disable_jit: ``ft.jit`` functions run their Python directly, un-compiled (as under
            ``ft.disable_jit()``, which sets it for a ``with`` block).
        eager_at: the numpy arrays ``functrace.numpy`` functions return (outside
            transforms, and constants such as ``fnp.zeros(3)`` inside them) are
            ``fnp.AtArray``s (an ``np.ndarray`` subclass whose only addition is JAX's
            ``.at[idx]``) instead of plain ``np.ndarray``s, so code ported from JAX that
            writes ``x.at[i].set(v)`` also runs eagerly. Off by default: results are plain
            numpy arrays, as docs/api.md promises (and numpy's ufuncs cost about 1 µs more
            per call on a subclass of a small array). Without it, ``fnp.at(x)[i].set(v)``
            works on any array, and tracers always have ``.at``.
    """

    __slots__ = ("eager_at", "debug_nans", "enable_checks")
    _names = ("debug_nans", "enable_checks", "disable_jit", "eager_at")

    def __init__(self):
        self.eager_at = False
        self.debug_nans = False
        self.enable_checks = False

    @property
    def disable_jit(self) -> bool:
        return DISABLE_JIT.get()

    @disable_jit.setter
    def disable_jit(self, value: bool) -> None:
        DISABLE_JIT.set(bool(value))

    def update(self, name: str, value) -> None:
        """Set a switch by name (``jax.config.update`` style; a ``jax_`` prefix is accepted:
        ``update("jax_debug_nans", True)``); unknown names are an error."""
        key = name[4:] if name.startswith("jax_") else name
        if key not in self._names:
            raise AttributeError(f"ft.config has no switch {name!r}; the switches are "
                                 f"{', '.join(self._names)}")
        setattr(self, key, value)

    def __repr__(self):
        return "ft.config(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self._names) + ")"


config = Config()


@contextlib.contextmanager
def disable_jit(disable: bool = True) -> Iterator[None]:
    """``with ft.disable_jit():`` runs ``ft.jit`` functions as plain Python (un-traced,
    un-compiled) in the block, as JAX's ``jax.disable_jit()``: print statements and
    debuggers see concrete values. Nests, and is local to the thread or task.

    Example:
        >>> import numpy as np, functrace as ft
        >>> f = ft.jit(lambda x: print("ran with", x) or x * 2)
        >>> with ft.disable_jit():
        ...     y = f(np.ones(2))
        ran with [1. 1.]
    """
    token = DISABLE_JIT.set(bool(disable))
    try:
        yield
    finally:
        DISABLE_JIT.reset(token)
