"""Time per data-parallel gradient step on local Dask clusters of 1 and 2 workers, against
``ft.jit(ft.value_and_grad(loss))`` in this process, all in the same run.

Run:  OPENBLAS_NUM_THREADS=1 python benchmarks/bench_distributed.py [rows] [rounds]

The problem: a tanh MLP (32 -> 256 -> 256 -> 1, float64, 75 000 parameters), mean squared
error over ``rows`` rows (default 16 384). Three ways to take one step (value and
gradient of the whole batch), each checked against the others before timing:

* ``single``: ``ft.jit(ft.value_and_grad(loss))`` on the whole batch, in this process;
* ``dist-1``: ``distributed.value_and_grad`` on a cluster of 1 worker process (1 shard);
* ``dist-2``: the same on a cluster of 2 worker processes (2 shards, one tree-sum).

Both clusters live through the run (an idle worker costs nothing), and the three are timed
in interleaved rounds (round r times each once, after an untimed warm-up that compiles),
so they see the same machine. Printed: the median seconds per step of each and the ratios
to ``single``; then the pieces of the cost model of docs/distributed.md, measured here:
the per-row compute time (``single`` / rows), the same step on an 8-row batch (what a step
costs when there is nothing to compute: scheduling, transfers of the parameters and
results, the driver's trace), and one empty Dask task's round trip.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import functrace as ft
import functrace.numpy as fnp
from functrace import distributed


def loss(params, x, y):
    (w1, b1), (w2, b2), w3 = params
    h = fnp.tanh(x @ w1 + b1)
    h = fnp.tanh(h @ w2 + b2)
    return fnp.mean((h @ w3 - y) ** 2)


def problem(rows: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    d, k = 32, 256
    params = ((rng.normal(size=(d, k)) / np.sqrt(d), np.zeros(k)),
              (rng.normal(size=(k, k)) / np.sqrt(k), np.zeros(k)),
              rng.normal(size=(k, 1)) / np.sqrt(k))
    return params, rng.normal(size=(rows, d)), rng.normal(size=(rows, 1))


def _noop(x):
    return x


def interleaved(fns: dict, rounds: int) -> dict:
    times: dict = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def main(rows: int = 16384, rounds: int = 9):
    from dask.distributed import Client, LocalCluster

    params, x, y = problem(rows)
    tiny = problem(8, seed=1)
    single = ft.jit(ft.value_and_grad(loss))
    clusters = {n: LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                dashboard_address=None) for n in (1, 2)}
    clients = {n: Client(c) for n, c in clusters.items()}
    try:
        steps = {n: distributed.value_and_grad(loss, c, batch_argnums=(1, 2))
                 for n, c in clients.items()}
        want = single(params, x, y)
        for _ in range(3):                   # interpreter, compile (hot), compiled
            single(params, x, y)
            got = {n: s(params, x, y) for n, s in steps.items()}
            for s in list(steps.values()):
                s(*tiny)
        for g in got.values():
            for a, b in zip(ft.tree_util.tree_leaves(g), ft.tree_util.tree_leaves(want)):
                np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)
        t = interleaved({"single": lambda: single(params, x, y),
                         "dist-1": lambda: steps[1](params, x, y),
                         "dist-2": lambda: steps[2](params, x, y),
                         "dist-1 8 rows": lambda: steps[1](*tiny),
                         "dist-2 8 rows": lambda: steps[2](*tiny),
                         "empty task": lambda: clients[2].submit(_noop, 1,
                                                                 pure=False).result()},
                        rounds)
    finally:
        for c in clients.values():
            c.close()
        for c in clusters.values():
            c.close()

    n_params = sum(a.size for a in ft.tree_util.tree_leaves(params))
    print(f"tanh MLP 32-256-256-1, {n_params} parameters (float64), {rows} rows; medians of "
          f"{rounds} interleaved rounds, {os.cpu_count()} CPUs")
    print(f"{'':16s} {'s/step':>9s} {'vs single':>10s}")
    for k in ("single", "dist-1", "dist-2"):
        print(f"{k:16s} {t[k]:9.4f} {t[k] / t['single']:9.2f}x")
    print(f"speed-up of 2 workers over 1: {t['dist-1'] / t['dist-2']:.2f}x")
    print("cost-model pieces:")
    print(f"  compute per row (single / rows): {1e6 * t['single'] / rows:.2f} us")
    for k in ("dist-1 8 rows", "dist-2 8 rows", "empty task"):
        print(f"  {k:31s}: {1e3 * t[k]:.1f} ms")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
