"""Equation counts of grad^k(f) (k = 1..4), jvp and hessian graphs, against JAX's
make_jaxpr (optional peer).

Run:  python benchmarks/bench_graph_size.py

For a scalar function, grad^k is grad applied k times. For vector functions, the k-th order
graph is the directional construction f_1 = grad(f), f_{k+1} = grad(x -> sum(f_k(x) * v)),
built identically for both systems. JAX's count inlines sub-jaxprs (pjit, custom_jvp_call,
...) and counts their equations, not the call equations, so both count primitive applications.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import functrace as ft
import functrace.numpy as fnp


def ft_count(fun, x):
    return len(ft.trace(fun)(x).nodes)


def jax_count(fun, x):
    import jax
    jaxpr = jax.make_jaxpr(fun)(x).jaxpr

    def count(jp):
        n = 0
        for e in jp.eqns:
            subs = [v for v in e.params.values() if hasattr(v, "jaxpr") or hasattr(v, "eqns")]
            if subs:
                for s in subs:
                    n += count(s.jaxpr if hasattr(s, "jaxpr") else s)
            else:
                n += 1
        return n
    return count(jaxpr)


def towers(np_mod, grad, sum_, v):
    """The k = 1..4 derivative functions of f, built with one system's grad."""
    def build(f, scalar):
        fs = [grad(f)]
        for _ in range(3):
            prev = fs[-1]
            if scalar:
                fs.append(grad(prev))
            else:
                fs.append(grad(lambda x, prev=prev: sum_(prev(x) * v)))
        return fs
    return build


def workloads(mod, special_lse):
    rng = np.random.default_rng(0)
    W1 = rng.standard_normal((5, 8)) * 0.3
    W2 = rng.standard_normal((8, 3)) * 0.3
    X = rng.standard_normal((4, 5))

    def sin_x(x):
        return mod.sin(x) * x

    def mlp(w):
        h = mod.tanh(X @ (W1 * w[0]) + w[1])
        logits = h @ W2
        return mod.sum(logits ** 2) / 4.0

    def lse(x):
        return special_lse(x)
    return [("sin(x)*x", sin_x, 0.7, True), ("tanh MLP loss", mlp, np.array([1.1, 0.2]), False),
            ("logsumexp", lse, np.array([0.3, -1.2, 2.0, 0.5]), False)]


def main():
    try:
        import jax
        import jax.numpy as jnp
        from jax.scipy.special import logsumexp as jlse
        jax.config.update("jax_enable_x64", True)
        have_jax = True
    except ImportError:
        have_jax = False
    rows = []
    ours = workloads(fnp, fnp.logsumexp)
    theirs = workloads(jnp, jlse) if have_jax else [None] * len(ours)
    for (name, f, x, scalar), peer in zip(ours, theirs):
        v = np.linspace(0.5, 1.5, np.size(x)) if not scalar else None
        fs = towers(fnp, ft.grad, fnp.sum, v)(f, scalar)
        js = towers(jnp, jax.grad, jnp.sum, v)(peer[1], scalar) if have_jax else [None] * 4
        for k in range(4):
            a = ft_count(fs[k], x)
            b = jax_count(js[k], x) if have_jax else None
            rows.append((name, k + 1, a, b))
    # forward mode and Hessians: jvp along v, and the full Hessian
    for (name, f, x, _scalar), peer in zip(ours, theirs):
        t = np.ones_like(np.asarray(x, dtype=float))
        a = ft_count(lambda x, f=f: ft.jvp(f, (x,), (t,))[1], x)
        b = jax_count(lambda x, f=peer[1]: jax.jvp(f, (x,), (t,))[1], x) if have_jax else None
        rows.append((name, "jvp", a, b))
        a = ft_count(ft.hessian(f), x)
        b = jax_count(jax.hessian(peer[1]), x) if have_jax else None
        rows.append((name, "hess", a, b))
    print(f"{'function':<16}{'k':>5}{'functrace':>11}{'jax':>7}{'ratio':>8}")
    worst = 0.0
    for name, k, a, b in rows:
        r = f"{a / b:.2f}" if b else "-"
        worst = max(worst, a / b if b else 0)
        print(f"{name:<16}{k:>5}{a:>11}{b if b is not None else '-':>7}{r:>8}")
    if have_jax:
        print(f"worst ratio functrace/jax: {worst:.2f} ({'OK' if worst <= 1 else 'OVER'})")


if __name__ == "__main__":
    main()
