"""Un-jitted transforms per call against autograd, in the same run.

Run:  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/bench_eager.py [--quick]

``ft.grad``, ``ft.value_and_grad`` and ``ft.hessian`` re-run the user's function on every
call (an eager tape, like autograd) and cache nothing. This script times them per call
against autograd's same transforms on the same functions, interleaved (round r times every
contender once, then round r+1), and prints medians and the ratio functrace / autograd
(< 1: functrace is faster). Every result is checked against autograd's before timing.

Workloads:
  small60     grad of a 60-op elementwise chain of a 10-element vector
  eq112       grad of a 112-equation function (mixed elementwise, reductions, a product,
              indexing) of 10-element vectors: where per-op overhead is everything
  rnn         grad through 200 steps of h = tanh(W@h + x_t), state 16
  chain       grad of sum(tanh(sin(x)*x + exp(-x**2))*0.5), x: 1e6 f64
  mlp32/64    value_and_grad of a 2-layer tanh MLP softmax-xent loss, 256x784->512->10
  hessian     full Hessian of the extended Rosenbrock function, n=200
  lse         grad of sum(logsumexp(X, axis=1)), X: 1000x1000
  hvp         hessian-vector product jvp(grad(f)) of the eq112 function (autograd:
              make_hvp)
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import autograd
import autograd.numpy as anp
from _timing import check_close, interleaved
from autograd.scipy.special import logsumexp as alse

import functrace as ft
import functrace.numpy as fnp

QUICK = False
ROUNDS = 9


def check(name, got, want, rtol=1e-10):
    check_close(name, got, want, rtol, "autograd's")


ROWS = []


def run(name, ft_fn, ag_fn, args, rtol=1e-10, flat=lambda r: [r]):
    check(name, flat(ft_fn(*args)), flat(ag_fn(*args)), rtol)
    med = interleaved({"functrace": lambda: ft_fn(*args), "autograd": lambda: ag_fn(*args)},
                      rounds=3 if QUICK else ROUNDS)
    ROWS.append((name, med["functrace"], med["autograd"]))


# --------------------------------------------------------------------------------------------
# workloads (each written once, for a numpy-like module m)
# --------------------------------------------------------------------------------------------

def chain60(m):
    def f(x):
        for i in range(20):
            x = m.sin(x) * 1.01 + 0.1 * (i % 3)
        return m.sum(x)
    return f


def eq112(m):
    """About 112 recorded equations on 10-element vectors: elementwise math, broadcasting
    against scalars, reductions, a matrix-vector product and slicing."""
    def f(x, w):
        A = m.reshape(w, (10, 10))
        s = 0.0
        h = x
        for _ in range(4):
            h = m.tanh(m.dot(A, h) * 0.3 + x) + m.exp(-h * h) * 0.1
            s = s + m.sum(h[1:] * h[:-1]) + m.mean(m.log1p(h * h))
            h = h * m.sqrt(1.0 + h * h) - m.sin(h) / (2.0 + m.cos(h))
        return s + m.sum(h ** 2)
    return f


def rnn(m):
    def f(W, xs):
        h = m.zeros(W.shape[0])
        for t in range(xs.shape[0]):
            h = m.tanh(W @ h + xs[t])
        return m.sum(h * h)
    return f


def chain_big(m):
    return lambda x: m.sum(m.tanh(m.sin(x) * x + m.exp(-x ** 2)) * 0.5)


def mlp(m, lse):
    def f(p, x, y):
        W1, b1, W2, b2 = p
        h = m.tanh(m.dot(x, W1) + b1)
        z = m.dot(h, W2) + b2
        return -m.sum(y * (z - lse(z, axis=1, keepdims=True))) / x.shape[0]
    return f


def rosen(m):
    return lambda x: m.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def main():
    global QUICK, ROUNDS
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=ROUNDS,
                    help="interleaved rounds per workload (more: steadier medians on a busy "
                         "machine)")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    QUICK, ROUNDS = a.quick, a.rounds
    only = set(a.only.split(",")) - {""}
    rng = np.random.default_rng(0)

    def want(k):
        return not only or k in only

    if want("small60"):
        x = np.linspace(0.1, 1.0, 10)
        run("small60: grad, 60 ops, 10 elems", ft.grad(chain60(fnp)),
            autograd.grad(chain60(anp)), (x,))
    if want("eq112"):
        x, w = rng.normal(size=10), rng.normal(size=100) * 0.3
        n_eq = len(ft.trace(eq112(fnp))(x, w).nodes)
        run(f"eq112: grad, {n_eq} eqns, 10 elems", ft.grad(eq112(fnp), argnums=(0, 1)),
            autograd.grad(eq112(anp), argnum=(0, 1)) if hasattr(autograd, "grad") else None,
            (x, w), flat=list)
    if want("hvp"):
        x, w = rng.normal(size=10), rng.normal(size=100) * 0.3
        v = rng.normal(size=10)
        fg = ft.grad(eq112(fnp))
        ft_hvp = lambda x, w, v: ft.jvp(lambda x: fg(x, w), (x,), (v,))[1]  # noqa: E731
        from autograd.differential_operators import make_hvp
        ag_hvp = lambda x, w, v: make_hvp(lambda x: eq112(anp)(x, w))(x)[0](v)  # noqa: E731
        run("hvp: jvp(grad(f)), eq112", ft_hvp, ag_hvp, (x, w, v))
    if want("rnn"):
        W, xs = rng.normal(0, 0.3, (16, 16)), rng.normal(size=(200, 16))
        run("rnn: grad, 200 steps, state 16", ft.grad(rnn(fnp)), autograd.grad(rnn(anp)),
            (W, xs))
    if want("chain"):
        x = rng.uniform(-3, 3, 10**6)
        run("chain: grad, 1e6 f64", ft.grad(chain_big(fnp)), autograd.grad(chain_big(anp)),
            (x,))
    for dt, key in ((np.float32, "mlp32"), (np.float64, "mlp64")):
        if not want(key):
            continue
        B, D, H, C = 256, 784, 512, 10
        p = [rng.normal(0, 0.05, (D, H)).astype(dt), np.zeros(H, dt),
             rng.normal(0, 0.05, (H, C)).astype(dt), np.zeros(C, dt)]
        x = rng.normal(size=(B, D)).astype(dt)
        y = np.eye(C, dtype=dt)[rng.integers(0, C, B)]
        tol = 1e-10 if dt == np.float64 else 2e-4
        run(f"{key}: value_and_grad, 256x784->512->10", ft.value_and_grad(mlp(fnp,
            fnp.logsumexp)), autograd.value_and_grad(mlp(anp, alse)), (p, x, y), rtol=tol,
            flat=lambda r: [r[0], *r[1]])
    if want("hessian"):
        x = rng.uniform(-1, 1, 200)
        run("hessian: rosenbrock n=200", ft.hessian(rosen(fnp)), autograd.hessian(rosen(anp)),
            (x,))
    if want("lse"):
        X = rng.normal(size=(1000, 1000))
        run("lse: grad, 1000x1000", ft.grad(lambda X: fnp.sum(fnp.logsumexp(X, axis=1))),
            autograd.grad(lambda X: anp.sum(alse(X, axis=1))), (X,))

    print(f"{'workload':<44}{'functrace':>12}{'autograd':>12}{'ft/ag':>8}")
    for name, t_ft, t_ag in ROWS:
        print(f"{name:<44}{t_ft * 1e6:>10.1f}µs{t_ag * 1e6:>10.1f}µs{t_ft / t_ag:>8.2f}")


if __name__ == "__main__":
    main()
