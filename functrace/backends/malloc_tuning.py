"""Keep glibc from returning large temporaries to the OS after every operation.

glibc's malloc serves blocks above ``M_MMAP_THRESHOLD`` (128 KiB at first) with a fresh
``mmap`` and unmaps them on ``free``; and it trims the top of the heap above
``M_TRIM_THRESHOLD``. Array code that allocates and frees the same few-hundred-KiB
temporaries over and over then pays page faults on every operation: measured here, the
compiled Hessian of a 200-variable function ran 4.5x faster (0.40 -> 0.09 ms) and its
interpreter tier 4x faster once the thresholds were raised (JAX's runtime raises them too,
which is why importing jax used to speed functrace up). ``tune_once()`` raises both
thresholds the first time a functrace backend runs a graph. It is process-wide, so numpy
code around it benefits as well; set ``FUNCTRACE_MALLOC_TUNING=0`` to leave malloc alone.
The price: up to 128 MiB of freed heap stays with the process, so ``ft.clear_caches()``
(``caches.clear_all``) ends with ``release_free_memory()``, a ``malloc_trim(0)``.
Imports caches only.
"""

from __future__ import annotations

import os

from .. import caches

__all__ = ["tune_once", "release_free_memory"]

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 1 << 26    # 64 MiB: larger blocks still come straight from mmap
_TRIM_THRESHOLD = 1 << 27    # keep up to 128 MiB of freed heap before trimming
_done = False


def tune_once() -> bool:
    """Raise glibc's mmap and trim thresholds once per process; False where not applicable."""
    global _done
    if _done:
        return True
    _done = True
    if os.environ.get("FUNCTRACE_MALLOC_TUNING", "1") == "0":
        return False
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD) == 1
        ok = libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD) == 1 and ok
        return ok
    except (OSError, AttributeError):   # not glibc (macOS, musl, Windows): nothing to do
        return False


def release_free_memory() -> bool:
    """Give the heap's free memory back to the OS (glibc ``malloc_trim(0)``); False where
    not applicable. Costs a walk of the heap: for ``ft.clear_caches()``, not for hot paths."""
    if not _done or os.environ.get("FUNCTRACE_MALLOC_TUNING", "1") == "0":
        return False                  # thresholds untouched: glibc trims by itself
    try:
        import ctypes
        return ctypes.CDLL("libc.so.6").malloc_trim(0) == 1
    except (OSError, AttributeError):
        return False


caches.register("malloc_trim", release_free_memory, release=True)
