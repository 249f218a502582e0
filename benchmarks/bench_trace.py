"""Tracing, eager-dispatch, replay and interpreter-tier gradient costs.

Run:  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/bench_trace.py

Prints medians of repeated timings and ratios against peers measured in the same run:
* tracing overhead per recorded equation (1,000-equation function)
* eager overhead of fnp.f(numpy array) over calling numpy directly
* replaying a traced 60-equation Symbol on 10-element arrays vs the same numpy calls
* building the gradient graph (trace + vjp + simplify) vs tracing the forward graph
* ft.grad per call on a 60-op function of a 10-element vector, vs autograd (and JAX eager)
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

from _timing import interleaved, median_time

import functrace as ft
import functrace.numpy as fnp
from functrace.autodiff import vjp_graph
from functrace.passes.simplify import optimize


def chain(mod, n_ops):
    """A function with about ``n_ops`` elementwise operations (3 per step)."""
    def f(x):
        for i in range(n_ops // 3):
            x = mod.sin(x) * 1.01 + 0.1 * (i % 3)
        return mod.sum(x)
    return f


def main():
    x10 = np.linspace(0.1, 1.0, 10)
    rows = []

    # 1. tracing overhead per equation
    f1000 = chain(fnp, 1000)
    sym = ft.trace(f1000)(x10)
    n = len(sym.nodes)
    t = median_time(lambda: ft.trace(f1000)(x10), repeat=5)
    rows.append(("trace: µs per recorded equation", t / n * 1e6, None, None,
                 f"{n} equations"))

    # 2. eager overhead
    a = np.linspace(0, 1, 10)
    t_np = median_time(lambda: np.sin(a), repeat=9, number=20000)
    t_f = median_time(lambda: fnp.sin(a), repeat=9, number=20000)
    t_np2 = median_time(lambda: np.add(a, a), repeat=9, number=20000)
    t_f2 = median_time(lambda: fnp.add(a, a), repeat=9, number=20000)
    rows.append(("eager fnp.sin overhead µs/call", (t_f - t_np) * 1e6, t_f, t_np,
                 "fnp.sin vs np.sin"))
    rows.append(("eager fnp.add overhead µs/call", (t_f2 - t_np2) * 1e6, t_f2, t_np2,
                 "fnp.add vs np.add"))

    # 3. replay of a 60-equation symbol vs direct numpy
    f60 = chain(fnp, 60)
    s60 = ft.trace(f60)(x10)
    f60_np = chain(np, 60)
    t_rep = median_time(lambda: s60(x10), repeat=9)
    t_dir = median_time(lambda: f60_np(x10), repeat=9)
    rows.append(("replay 60-eqn Symbol / direct numpy", t_rep / t_dir, t_rep, t_dir,
                 f"{len(s60.nodes)} equations"))

    # 4. building the gradient graph vs tracing
    f_mid = chain(fnp, 300)

    def build_grad():
        tr = ft.trace(f_mid)(x10).graph
        return optimize(vjp_graph(tr, [0], [np.ones(())]))
    t_tr = median_time(lambda: ft.trace(f_mid)(x10), repeat=5)
    t_bg = median_time(build_grad, repeat=5)
    t_vjp = t_bg - t_tr
    rows.append(("gradient graph build / forward trace", t_vjp / t_tr, t_vjp, t_tr,
                 "vjp_graph + simplify vs trace (300-op chain)"))

    # 5. grad per call on the interpreter tier, timed interleaved with its peers (round r
    # times every contender once), so a busy machine shifts all of them alike
    g = ft.grad(f60)
    contenders = {"functrace": lambda: g(x10)}
    try:
        import autograd
        import autograd.numpy as anp
        ag = autograd.grad(chain(anp, 60))
        contenders["autograd"] = lambda: ag(x10)
    except ImportError:
        pass
    try:
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_enable_x64", True)
        jg = jax.grad(chain(jnp, 60))
        contenders["jax eager"] = lambda: jg(x10).block_until_ready()
    except ImportError:
        pass
    med = interleaved(contenders, rounds=9)
    t_g = med.pop("functrace")
    peers = med
    rows.append(("ft.grad µs/call (60 ops, 10 elems)", t_g * 1e6, t_g, None, ""))
    for name, t in peers.items():
        rows.append((f"  {name} µs/call, ratio ft/{name}", t * 1e6, t_g / t, None, ""))

    print(f"{'measure':<44}{'value':>12}  note")
    for name, v, a_, b_, note in rows:
        extra = ""
        if name.startswith("  "):
            extra = f"ratio {a_:.3f}"
        elif a_ is not None and b_ is not None:
            extra = f"({a_ * 1e6:.2f} µs vs {b_ * 1e6:.2f} µs)"
        print(f"{name:<44}{v:>12.3f}  {extra} {note}")


if __name__ == "__main__":
    main()
