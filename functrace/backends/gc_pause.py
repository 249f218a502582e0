"""Compile with Python's cyclic garbage collector paused.

numba's compiler allocates millions of short-lived objects (IR nodes, type-inference
constraints, llvmlite wrappers). Each allocation burst triggers the collector, and its older
generations traverse every object the process holds, numba's and scipy's modules included:
about a fifth of a kernel compile was spent in ``gc`` (3.0 s of 15 s compiling five
op-table chunks; 10-20% of the scan RNN benchmark's cold compile). Pausing the collector for
the duration of a compile removes that. Nothing is leaked: reference counting still frees
acyclic garbage at once, and the cycles a compile leaves are found by the first collection
after it ends.

``paused()`` nests and is safe from several threads: the collector is disabled while at
least one compile runs, and re-enabled when the last ends, if it was enabled before the
first began (a program that disabled it itself keeps it disabled).
"""

from __future__ import annotations

import contextlib
import gc
import threading

__all__ = ["paused"]

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextlib.contextmanager
def paused():
    """Run the block with ``gc`` disabled (nesting, thread-safe; restores the caller's
    setting). Example::

        with paused():
            fn = load_kernel(key, source)
    """
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
