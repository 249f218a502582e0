"""The head every compiled target's executable shares: the options, the call counter of the
tiers (the reference interpreter first, compiled code once the graph is hot), the lowered
program, the buffer pools and the compile record; and ``debug_level``
(``FUNCTRACE_DEBUG``). Imports nothing from functrace."""

from __future__ import annotations

import os
import threading

__all__ = ["ExecutableBase", "debug_level"]


def debug_level() -> int:
    """``FUNCTRACE_DEBUG``: 1 prints each compiled graph, 2 also its kernels (0 if unset)."""
    try:
        return int(os.environ.get("FUNCTRACE_DEBUG", "0"))
    except ValueError:
        return 0


class ExecutableBase:
    """What a target's executable holds before it lowers anything.

    Attributes:
        graph: the graph it runs.
        donate: indices of the inputs whose buffers it may reuse.
        eager: compile at the first call (no interpreter tier).
        hot_after: calls run by the interpreter before compiling (``FUNCTRACE_HOT``, 2).
        cached_after: the call that compiles when every kernel is already in the disk cache
            (loading them costs no numba compile: default 1, the first call). A caller that
            runs many small graphs once each (eager random draws) raises it, so that a graph
            called once never pays for importing numba and loading kernels.
        calls: calls so far.
        compile_seconds: time the last compile took.
        compile_failures: why kernels failed to compile (their groups ran as single ops).
    """

    def __init__(self, graph, *, donate: tuple = (), eager: bool = False,
                 hot_after: int | None = None, cached_after: int | None = None):
        self.graph = graph
        self.donate = tuple(donate)
        self.eager = eager
        self.hot_after = hot_after if hot_after is not None else int(
            os.environ.get("FUNCTRACE_HOT", "2"))
        self.cached_after = 1 if cached_after is None else cached_after
        self.calls = 0
        self._program = None
        self._pools: list = []
        self._lock = threading.Lock()
        self.compile_seconds = 0.0
        self.compile_failures: list[str] = []
