"""Benchmark functrace.random against numpy's Generator and (when installed) jax.random.

Times, over 10**6 samples and as medians of interleaved repeats in one process:
  * ``ft.jit``  -- ``ft.jit(lambda k: random.normal(k, (n,), dtype))(key)`` (CPU kernels,
                   compiled before timing),
  * ``numpy``   -- ``np.random.default_rng().standard_normal(n, dtype=dtype)`` (ziggurat),
  * ``jax.jit`` -- ``jax.jit(lambda k: jax.random.normal(k, (n,), dtype))(key)`` with
                   ``block_until_ready`` (skipped without jax),
  * ``eager``   -- ``random.normal(key, (n,), dtype)`` outside jit (one call),
and the same for ``uniform`` (numpy: ``rng.random``). It also checks that functrace's and
jax's samples are the same bits.

A second table times eager calls (no ``ft.jit`` around them: functrace.random compiles their
bit-exact part internally, ``functrace/random/_eager.py``) for 1, 10**3 and 10**6 draws:
``first`` is the first call of that signature in this process (kernels may come from the
disk cache; the 10**3 and 10**6 draws share their kernels), ``warm`` the median of
interleaved calls after 20 warm-up calls (the compiled tier), against
``numpy.random.Generator``, jax's eager ``jax.random.normal``/``uniform`` (first call and
warm, with ``block_until_ready``) and functrace under ``ft.disable_jit()`` (op by op: what
every eager call cost before; one call at 10**6).

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


def eager_table(sizes=(1, 10**3, 10**6)) -> None:
    jax = _jax()
    key = random.key(0)
    rng = np.random.default_rng(0)
    print(f"\neager calls (no ft.jit), ms; warm = median of {REPEATS} interleaved calls")
    head = f"{'':22} {'ft first':>9} {'ft warm':>9} {'numpy':>9} {'disable_jit':>11}"
    if jax is not None:
        head += f" {'jax first':>9} {'jax warm':>9}"
    print(head + f" {'numpy/ft':>8}")
    for name in ("normal", "uniform"):
        for dt in (np.float32, np.float64):
            for n in sizes:
                shape = () if n == 1 else (n,)
                fts = getattr(random, name)
                t = time.perf_counter()
                fts(key, shape, dt)
                first = time.perf_counter() - t
                for _ in range(20):
                    fts(key, shape, dt)
                size = None if n == 1 else n
                np_fn = ((lambda dt=dt, size=size: rng.standard_normal(size, dtype=dt))
                         if name == "normal" else
                         (lambda dt=dt, size=size: rng.random(size, dtype=dt)))
                cands = {"ft": lambda fts=fts, shape=shape, dt=dt: fts(key, shape, dt),
                         "numpy": np_fn}
                jfirst = None
                if jax is not None:
                    jfn, jk = getattr(jax.random, name), jax.random.PRNGKey(0)
                    t = time.perf_counter()
                    jfn(jk, shape, dt).block_until_ready()
                    jfirst = time.perf_counter() - t
                    cands["jax"] = (lambda jfn=jfn, jk=jk, shape=shape, dt=dt:
                                    jfn(jk, shape, dt).block_until_ready())
                times: dict[str, list[float]] = {k: [] for k in cands}
                for _ in range(REPEATS):
                    for label, fn in cands.items():
                        t = time.perf_counter()
                        fn()
                        times[label].append(time.perf_counter() - t)
                slow = []
                with ft.disable_jit():
                    for _ in range(1 if n >= 10**6 else 5):
                        t = time.perf_counter()
                        fts(key, shape, dt)
                        slow.append(time.perf_counter() - t)
                med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
                line = (f"{name} {np.dtype(dt).name} n={n:<9,} {first * 1e3:9.3f} "
                        f"{med['ft']:9.4f} {med['numpy']:9.4f} "
                        f"{statistics.median(slow) * 1e3:11.3f}")
                if jax is not None:
                    line += f" {jfirst * 1e3:9.3f} {med['jax']:9.4f}"
                print(line + f" {med['numpy'] / med['ft']:8.2f}")


if __name__ == "__main__":
    main()
    eager_table()
