"""Loading the CPU target's generated modules: kernels (``ftk_<key>.py``) and compiled loops
(``ftl_<key>.py``), each a numba dispatcher kept in memory by content hash, and whether numba
has a module's machine code on disk already. Imports numba only through the modules it loads.
Imports caches and ``backends.modfiles``."""

from __future__ import annotations

import os
import sys
import threading

from ... import caches
from ..modfiles import cache_dir, load_source_module
from .numba_target import configure as configure_numba

__all__ = ["load_kernel", "load_loop", "is_cached_on_disk", "clear_kernels"]


def _unloader(package: str, prefix: str):
    """An ``on_drop`` that forgets an evicted kernel module in ``sys.modules`` too (else the
    module, its dispatcher and its machine code would outlive the cache entry)."""
    def drop(key, _fn):
        sys.modules.pop(f"{package}.{prefix}{key}", None)
    return drop


# key -> numba dispatcher (shared by every graph); key -> compiled loop (cpu_loop), likewise
_kernels = caches.LRU("numba_cpu.kernels", scale=4,
                      on_drop=_unloader("functrace_kernels", "ftk_"))
_loops = caches.LRU("numba_cpu.loops", scale=4, on_drop=_unloader("functrace_loops", "ftl_"))
_kernel_lock = threading.RLock()


# module file prefix -> (in-memory memo, package name, function the module defines)
_KINDS = {"ftk_": (_kernels, "functrace_kernels", "kernel"),
          "ftl_": (_loops, "functrace_loops", "loop")}


def is_cached_on_disk(key: str, prefix: str = "ftk_") -> bool:
    """Whether numba has machine code for this kernel (``prefix="ftl_"``: compiled loop)
    on disk (no numba import)."""
    memo, _, fn = _KINDS[prefix]
    if key in memo:
        return True
    d = os.path.join(cache_dir(), "__pycache__")
    try:
        names = os.listdir(d)
    except OSError:
        return False
    stem = f"{prefix}{key}.{fn}"
    return any(n.startswith(stem) and n.endswith(".nbi") for n in names)


def _load(prefix: str, key: str, source: str):
    """The numba dispatcher defined by a generated module: from memory, else import its module
    file (written first if missing). Compilation itself happens on the first call (or from
    numba's cache)."""
    memo, package, fn = _KINDS[prefix]
    f = memo.get(key)
    if f is not None:
        return f
    with _kernel_lock:
        f = memo.get(key)
        if f is None:
            configure_numba()          # before the module's @njit makes numba's codegen
            f = memo[key] = getattr(load_source_module(package, prefix, key, source), fn)
        return f


def load_kernel(key: str, source: str):
    """The numba dispatcher of a kernel (``ftk_<key>.py``)."""
    return _load("ftk_", key, source)


def load_loop(key: str, source: str):
    """The numba dispatcher of a compiled loop (``cpu_loop``, ``ftl_<key>.py``)."""
    return _load("ftl_", key, source)


def clear_kernels() -> None:
    """Forget the loaded kernels and loops (their modules leave ``sys.modules`` too)."""
    _kernels.clear()
    _loops.clear()
