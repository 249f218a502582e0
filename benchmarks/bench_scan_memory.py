"""Peak memory and time of the gradient of a 1000-step ``ft.scan``, with and without
``ft.checkpoint`` around the body.

Run:  OPENBLAS_NUM_THREADS=1 python benchmarks/bench_scan_memory.py [--steps 1000] [--dim 256]

The body is ``c = sin(tanh(W @ h + x)) * tanh(W @ h + x) + cos(W @ h + x)`` on a state of
``--dim`` float64 values; the loss is ``sum(h_T ** 2)`` and the gradient is taken with respect
to ``W`` and ``h0``. Peak memory is ``tracemalloc``'s peak over one warm call (numpy's buffers
are traced; memory held by compiled numba code is not), so it counts what the gradient keeps
alive, not the process's RSS. Rows: un-jitted ``ft.grad`` and ``ft.jit(ft.grad)`` on the CPU
executor (warm: compiled before the measured call). Figures: docs/control_flow.md.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

import functrace as ft
import functrace.numpy as fnp


def make_loss(xs, remat: bool):
    def loss(W, h0):
        def step(h, x):
            a = W @ h + x
            b = fnp.tanh(a)
            return fnp.sin(b) * b + fnp.cos(a), None
        h, _ = ft.scan(ft.checkpoint(step) if remat else step, h0, xs)
        return fnp.sum(h * h)
    return loss


def measure(f, args, warm: int):
    for _ in range(warm):
        f(*args)
    tracemalloc.start()
    t = time.perf_counter()
    out = f(*args)
    dt = time.perf_counter() - t
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return out, peak, dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--dim", type=int, default=256)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    W = rng.normal(size=(a.dim, a.dim)) / np.sqrt(a.dim)
    xs = rng.normal(size=(a.steps, a.dim))
    h0 = np.zeros(a.dim)
    one = a.steps * a.dim * 8 / 1e6
    print(f"{a.steps} steps, state of {a.dim} float64: one value per step, stacked, is "
          f"{one:.2f} MB; xs itself is {xs.nbytes / 1e6:.2f} MB")
    ref = None
    for mode in ("eager", "jit"):
        for remat in (False, True):
            g = ft.grad(make_loss(xs, remat), argnums=(0, 1))
            if mode == "jit":
                g = ft.jit(g)
            out, peak, dt = measure(g, (W, h0), warm=3 if mode == "jit" else 1)
            ref = out if ref is None else ref
            for u, v in zip(out, ref):
                np.testing.assert_allclose(u, v, rtol=1e-9, atol=1e-12)
            name = f"{mode} {'checkpoint' if remat else 'plain'}"
            print(f"{name:18s} peak {peak / 1e6:7.2f} MB ({peak / 1e6 / one:4.1f} x one "
                  f"stacked value)  {dt * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
