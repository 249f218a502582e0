"""Backends: run a Graph. ``reference`` is the living definition of every op; the compiled
targets (``cpu/``: numba loops, ``cuda/``: numba-cuda kernels) share ``lowering/`` and are
checked against it. ``registry`` maps the names ``ft.jit(backend=...)`` takes to targets;
this file registers the built-in ones, each imported on its first use (so importing functrace
imports no numba). Imports ops/passes, never the API layer."""

from __future__ import annotations

from .registry import register_target


def _reference(graph, *, donate=(), eager=False, threads="auto"):
    from . import reference
    return lambda *xs: reference.run(graph, xs)


def _cpu(graph, *, donate=(), eager=False, threads="auto", hot_after=None,
         cached_after=None):
    from .cpu import executor
    return executor.compile(graph, donate=donate, eager=eager, parallel=threads,
                            hot_after=hot_after, cached_after=cached_after)


def _cuda(graph, *, donate=(), eager=False, threads="auto"):
    from .cuda import executor  # the GPU is checked at the first call
    return executor.compile(graph, donate=donate, eager=eager)


register_target("cpu", _cpu)
register_target("cuda", _cuda)
register_target("numpy", _reference)
