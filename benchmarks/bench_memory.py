"""Memory held by functrace's caches: RSS and live ``Graph`` objects after N distinct shapes.

Run:  python benchmarks/bench_memory.py [--n 2000] [--calls 2] [scenario ...]

Scenarios (each in a fresh subprocess, so one does not inherit another's heap):

* ``jit``        one ``ft.jit(f)``, called on N distinct shapes (1-d, sizes N..2N-1 shuffled)
* ``jit_grad``   one ``ft.jit(ft.grad(f))``, called on N distinct shapes
* ``symbol``     per shape a new ``ft.trace(f)(x)`` Symbol, called and dropped
* ``autograd``   per shape a recorded computation and its ``backward()`` (imperative facade)
* ``same``       one ``ft.jit(f)`` called 10,000 times at one shape (RSS must stay flat)

Each shape is called ``--calls`` times (default 2: the second call of a new graph compiles
it, so buffer pools and drivers are made too). Printed per scenario: RSS (MiB, from
/proc/self/statm) and live Graph objects at the start, at N/4, N/2 and N, after dropping the
function and ``gc.collect()``, and after ``ft.clear_caches()`` (plus
``functrace.caches.clear_all()`` where it exists). Linux only (statm).

Figures before and after the memory work: docs/executor.md ("Caches and memory") and the
raw output in benchmarks/results/memory.log.
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

_PAGE = os.sysconf("SC_PAGE_SIZE")
SCENARIOS = ("jit", "jit_grad", "symbol", "autograd", "same")


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE / 2**20


def live_graphs() -> int:
    from functrace.core import Graph
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is Graph)


def clear_everything() -> None:
    import functrace as ft
    ft.clear_caches()
    try:
        from functrace import caches
    except ImportError:
        return
    caches.clear_all()


def run_one(name: str, n: int, calls: int) -> None:
    import functrace as ft
    import functrace.numpy as fnp

    def f(x):          # ~40 equations (distinct literals per step: nothing is rolled)
        y = x
        for i in range(8):
            y = fnp.tanh(y * 0.5 + float(i)) + fnp.sin(y) * (1.0 + i)
        return fnp.sum(y)

    rows = []

    def mark(label):
        rows.append((label, rss_mib(), live_graphs()))

    # warm up what every scenario shares (numba import, kernels, numpy's own caches)
    jf0 = ft.jit(f)
    for _ in range(3):
        jf0(np.ones(3))
        ft.jit(ft.grad(f))(np.ones(3))
    del jf0
    clear_everything()
    mark("start")
    checkpoints = {n // 4, n // 2, n}
    # n distinct 1-d shapes of sizes in [n, 2n), shuffled: sizes do not trend, so what a
    # bounded cache keeps alive does not grow with them
    sizes = [int(k) for k in np.random.default_rng(0).permutation(np.arange(n, 2 * n))]

    if name == "same":
        fun = ft.jit(f)
        x = np.linspace(0, 1, 64)
        for i in range(1, 10_001):
            fun(x)
            if i in (100, 2_500, 5_000, 10_000):
                mark(f"{i} calls")
        del fun
    elif name in ("jit", "jit_grad"):
        fun = ft.jit(f) if name == "jit" else ft.jit(ft.grad(f))
        for k, size in enumerate(sizes, 1):
            x = np.linspace(0, 1, size)
            for _ in range(calls):
                fun(x)
            if k in checkpoints:
                mark(f"{k} shapes")
        del fun
    elif name == "symbol":
        for k, size in enumerate(sizes, 1):
            x = np.linspace(0, 1, size)
            sym = ft.trace(f)(x)
            for _ in range(calls):
                sym(x)
            del sym
            if k in checkpoints:
                mark(f"{k} shapes")
    elif name == "autograd":
        ag = ft.autograd
        for k, size in enumerate(sizes, 1):
            w = ag.attach_grad(np.linspace(0, 1, size))
            for _ in range(calls):
                with ag.record():
                    loss = f(w)
                loss.backward()
            del w, loss
            if k in checkpoints:
                mark(f"{k} shapes")
    else:
        raise SystemExit(f"unknown scenario {name!r}")
    del f
    mark("dropped + gc")
    clear_everything()
    mark("clear_caches")
    base = rows[0][1]
    print(f"== {name} (n={n}, calls/shape={calls})")
    for label, rss, graphs in rows:
        print(f"  {label:>16}: RSS {rss:8.1f} MiB ({rss - base:+8.1f})   live Graphs {graphs:6d}")
    sys.stdout.flush()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="*", default=list(SCENARIOS))
    ap.add_argument("--n", type=int, default=2000, help="distinct shapes")
    ap.add_argument("--calls", type=int, default=2, help="calls per shape")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        run_one(a.scenarios[0], a.n, a.calls)
        return
    env = dict(os.environ, OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS", "1"))
    for s in a.scenarios:
        subprocess.run([sys.executable, __file__, "--one", "--n", str(a.n), "--calls",
                        str(a.calls), s], check=True, env=env)


if __name__ == "__main__":
    main()
