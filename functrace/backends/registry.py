"""The targets ``ft.jit(backend=...)`` can name: a registry from a name to a compile function.

A target registers ``compile(graph, *, donate, eager, threads) -> run`` (``threads``: what
``ft.jit`` was given, ``"auto"``, an int or False; a target may ignore it; the "cpu" target also
takes the tier options ``hot_after`` and ``cached_after``: a ``Jitted`` made with them passes
them on), where ``run(*arrays)``
returns the list of the graph's outputs and may have ``.lower()`` (a program with
``.source``) and ``.compile()`` (compile now). ``functrace.backends`` registers the built-in
targets ("cpu", "cuda", "numpy") with functions that import their modules on first use, so
naming a target costs nothing until it runs. Imports errors only.

Example:
    >>> import functrace as ft, functrace.numpy as fnp
    >>> from functrace.backends import reference, registry
    >>> registry.register_target("interp", lambda g, **kw: lambda *xs: reference.run(g, xs))
    >>> ft.jit(lambda x: fnp.sin(x) * 2, backend="interp")(1.0)
    array(1.68294197)
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import FunctraceValueError

__all__ = ["register_target", "lookup_target", "target_names"]

_TARGETS: dict[str, Callable] = {}


def register_target(name: str, compile: Callable) -> None:
    """Make ``ft.jit(f, backend=name)`` run its graphs with ``compile`` (a later registration
    of the same name replaces the earlier one)."""
    _TARGETS[name] = compile


def target_names() -> tuple[str, ...]:
    """The names registered, in registration order."""
    return tuple(_TARGETS)


def lookup_target(name: str, where: str = "") -> Callable:
    """The compile function registered as ``name``; a ``ValueError`` naming the registered
    targets if there is none."""
    try:
        return _TARGETS[name]
    except (KeyError, TypeError):
        raise FunctraceValueError(
            f"ft.jit: unknown backend {name!r}; the registered targets are "
            f"{', '.join(map(repr, _TARGETS))} (register one with "
            f"functrace.backends.registry.register_target){f' ({where})' if where else ''}"
        ) from None
