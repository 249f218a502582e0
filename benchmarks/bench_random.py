"""Benchmark functrace.random against numpy's Generator and (when installed) jax.random.

Times, over 10**6 samples and as medians of interleaved repeats in one process:
  * ``ft.jit``  -- ``ft.jit(lambda k: random.normal(k, (n,), dtype))(key)`` (CPU kernels,
                   compiled before timing),
  * ``numpy``   -- ``np.random.default_rng().standard_normal(n, dtype=dtype)`` (ziggurat),
  * ``jax.jit`` -- ``jax.jit(lambda k: jax.random.normal(k, (n,), dtype))(key)`` with
                   ``block_until_ready`` (skipped without jax),
  * ``eager``   -- ``random.normal(key, (n,), dtype)`` outside jit (the numpy definition),
and the same for ``uniform`` (numpy: ``rng.random``). It also checks that functrace's and
jax's samples are the same bits.

Run (jax lives in its own venv; functrace never needs it):
    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. /work/venv-jax/bin/python benchmarks/bench_random.py
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

import functrace as ft
import functrace.random as random

N = 10**6
REPEATS = 21


def _jax():
    try:
        import jax
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    return jax


def main(n: int = N) -> None:
    jax = _jax()
    key = random.key(0)
    rng = np.random.default_rng(0)
    rows = []
    for name in ("normal", "uniform"):
        for dt in (np.float64, np.float32):
            fts = getattr(random, name)
            f = ft.jit(lambda k, fts=fts, dt=dt: fts(k, (n,), dt), eager=True)
            f(key)
            np_fn = ((lambda dt=dt: rng.standard_normal(n, dtype=dt)) if name == "normal"
                     else (lambda dt=dt: rng.random(n, dtype=dt)))
            cands = {"ft.jit": lambda f=f: f(key), "numpy": np_fn}
            same = ""
            if jax is not None:
                jfn = getattr(jax.random, name)
                jf = jax.jit(lambda k, jfn=jfn, dt=dt: jfn(k, (n,), dt))
                jk = jax.random.PRNGKey(0)
                jf(jk).block_until_ready()
                cands["jax.jit"] = lambda jf=jf, jk=jk: jf(jk).block_until_ready()
                same = "yes" if np.asarray(jf(jk)).tobytes() == f(key).tobytes() else "NO"
            times: dict[str, list[float]] = {k: [] for k in cands}
            for _ in range(REPEATS):
                for label, fn in cands.items():
                    t = time.perf_counter()
                    fn()
                    times[label].append(time.perf_counter() - t)
            t = time.perf_counter()
            fts(key, (n,), dt)
            eager = time.perf_counter() - t
            med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
            rows.append((f"{name} {np.dtype(dt).name}", med, eager * 1e3, same))
    print(f"functrace.random, {n:,} samples, median of {REPEATS} interleaved runs (ms); "
          f"python {sys.version.split()[0]}, numpy {np.__version__}"
          + (f", jax {jax.__version__}" if jax else ""))
    print(f"{'':16} {'ft.jit':>8} {'numpy':>8} {'jax.jit':>8} {'eager':>8}  same bits as jax")
    for label, med, eager, same in rows:
        jx = f"{med['jax.jit']:8.2f}" if "jax.jit" in med else f"{'-':>8}"
        print(f"{label:16} {med['ft.jit']:8.2f} {med['numpy']:8.2f} {jx} {eager:8.0f}  {same}")


if __name__ == "__main__":
    main()
