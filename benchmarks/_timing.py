"""Shared timing helpers for the benchmark scripts: medians of repeated batches, the
cold-cache first call of ``ft.jit``, and the result check done before timing."""

from __future__ import annotations

import os
import statistics
import tempfile
import time


def median_time(fn, repeat: int = 7, number: int | None = None) -> float:
    """Median seconds per call of ``fn`` over ``repeat`` batches of ``number`` calls (chosen
    to last ~20 ms when not given). The first call is a warm-up and is not timed."""
    fn()
    if number is None:
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        number = max(1, int(0.02 / max(dt, 1e-7)))
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) / number)
    return statistics.median(times)


def interleaved(fns: dict, rounds: int = 7, budget: float = 0.05) -> dict:
    """Median seconds per call of each function, timed in interleaved rounds (round r times
    every function once, then round r+1), so all of them see the same machine state. Each
    function is called once untimed, then in batches sized to last about ``budget`` s."""
    numbers = {}
    for k, f in fns.items():
        f()
        t0 = time.perf_counter()
        f()
        numbers[k] = max(1, int(budget / max(time.perf_counter() - t0, 1e-7)))
    times: dict = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            n = numbers[k]
            t0 = time.perf_counter()
            for _ in range(n):
                f()
            times[k].append((time.perf_counter() - t0) / n)
    return {k: statistics.median(v) for k, v in times.items()}


def check_close(name, got, want, rtol, what="the reference"):
    """Raise AssertionError when ``got`` and ``want`` (lists of arrays) differ by more than
    ``rtol`` relative to max(1, |want|)."""
    import numpy as np
    got = [np.asarray(g, dtype=np.float64) for g in got]
    want = [np.asarray(w, dtype=np.float64) for w in want]
    for g, w in zip(got, want, strict=True):
        scale = max(1.0, float(np.max(np.abs(w))))
        err = float(np.max(np.abs(g - w))) / scale if w.size else 0.0
        if not err <= rtol:
            raise AssertionError(f"{name}: result differs from {what} (max rel err "
                                 f"{err:.2e} > {rtol:.0e})")


def jit_cold(fn, *args):
    """``ft.jit(fn, eager=True)`` and its first call with an empty kernel cache (the full
    compile cost of the generated kernels): (jitted, first result, seconds). numba's own
    cache of the helper modules the kernels call (``cache=True`` functions such as the
    special-function kernels, kept next to their source) is left as it is."""
    with tempfile.TemporaryDirectory() as d:
        old = os.environ.get("FUNCTRACE_CACHE_DIR")
        os.environ["FUNCTRACE_CACHE_DIR"] = d
        try:
            import functrace as ft
            jitted = ft.jit(fn, eager=True)
            t0 = time.perf_counter()
            out = jitted(*args)
            return jitted, out, time.perf_counter() - t0
        finally:
            if old is None:
                del os.environ["FUNCTRACE_CACHE_DIR"]
            else:
                os.environ["FUNCTRACE_CACHE_DIR"] = old
