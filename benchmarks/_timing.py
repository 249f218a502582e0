"""Shared timing helper for the benchmark scripts: medians of repeated batches."""

from __future__ import annotations

import statistics
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
