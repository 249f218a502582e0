"""CPU executor benchmarks: functrace jit and interpreter vs numpy, autograd, JAX, torch.

Run:  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/bench_cpu.py [--quick]

Every workload is timed for every backend *interleaved* (round r times backend 1, 2, ... once
each, then round r+1), so all backends of a workload see the same machine state; the table
shows medians and the ratio to the hand-derived numpy gradient of the same run. Every result
is checked against the hand-derived gradient before timing. Peers that are not installed
(torch here) are skipped. Everything runs single-threaded (functrace too:
``FUNCTRACE_NUM_THREADS=1``).

Thread scaling:  python benchmarks/bench_cpu.py --threads N [--repeats R] [--only chain,...]
(N an int or ``all``): each workload of ``_scaling_workloads`` with functrace (``threads=N``)
and jax.jit, XLA set to the same N threads (``_thread_env.py``), in worker processes at 1 and
N threads run in turn R times (XLA's pool is fixed when a process starts); prints the 1 -> N
speedup of both, functrace's same-process speedup, a forced parallel launch of 1e3 elements
(its cost), and cold compile times with threads="auto" and False (first and second call).

Workloads (targets, ratio to the hand-derived numpy gradient):
  chain      grad of sum(tanh(sin(x)*x + exp(-x**2))*0.5), x: 1e6 f64        <= 0.25
  mlp32/64   grad of a 2-layer tanh MLP softmax-xent loss, 256x784->512->10  <= 1.0
  hessian    full Hessian of the extended Rosenbrock function, n=200         <= 4.2
  hessian_strided  the same written with a = x[0::2], b = x[1::2] (pads with interior
             padding, strided slices of jacfwd's basis); no target: against jax.jit
  rnn        grad through 200 steps of h = tanh(W@h + x_t), state 16         <= 0.21 warm,
                                                                             <= 2 s compile
  scan_rnn   the rnn written with ft.scan, against a hand-written numba kernel:
             warm <= 1.2x the numba kernel, <= 1 s compile with a cold cache
  lse        grad of sum(logsumexp(X, axis=1)), X: 1000x1000                 <= 0.8
  arith      exact arithmetic, 1e5 f64 (in cache): a degree-8 polynomial written
             as 8 multiply-adds, and a division chain, forward only; no target:
             the workload that FMA contraction and reciprocal divisions would speed
             up, which kernels no longer do (numpy's IEEE results)
  startup    fresh process -> first gradient (1e4 elements)                  <= 0.85 s (jit,
             with Python's bytecode cache, as users run it; rows      warm disk cache),
             without any bytecode cache follow, no target)            <= 0.3 s (interp.)
  memory     peak memory of the jit gradient of `chain` at 1e7 elements      <= 2.5 inputs
"""

from __future__ import annotations

import os
import sys

# before numpy, numba or jax start: the thread counts of this process (benchmarks/_thread_env),
# only when run as the benchmark: tests import its workloads (rosen, ...) and must keep their
# own thread settings
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if __name__ == "__main__":
    import _thread_env  # noqa: F401

# isort: split

import argparse
import json
import statistics
import subprocess
import tempfile
import time
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _blas
from _timing import check_close, jit_cold
from _timing import interleaved as _interleaved

import functrace as ft
import functrace.numpy as fnp

try:
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    from jax.scipy.special import logsumexp as jlse
except ImportError:   # optional peer
    jax = None
try:
    import autograd
    import autograd.numpy as anp
    from autograd.scipy.special import logsumexp as alse
except ImportError:   # optional peer
    autograd = None
try:
    import torch
    torch.set_num_threads(1)
except ImportError:   # optional peer
    torch = None

QUICK = False


# --------------------------------------------------------------------------------------------
# timing
# --------------------------------------------------------------------------------------------

def interleaved(fns: dict, rounds=7, budget=0.05):
    """Median seconds per call of each function; rounds interleave the backends."""
    return _interleaved(fns, rounds if not QUICK else 3, budget)


def check(name, got, want, rtol):
    check_close(name, got, want, rtol, "the hand-derived gradient")


def to_np(x):
    if torch is not None and isinstance(x, torch.Tensor):
        return x.detach().numpy()
    return np.asarray(x)


ROWS = []


def report(workload, medians, base="numpy (hand)", note="", target=None):
    t0 = medians[base]
    for k, t in medians.items():
        ROWS.append((workload, k, t, t / t0, note if k.startswith("functrace jit") else "",
                     target if k.startswith("functrace jit") else None))


# --------------------------------------------------------------------------------------------
# 1. elementwise chain
# --------------------------------------------------------------------------------------------

def chain_hand(x):
    s = np.sin(x)
    e = np.exp(-x * x)
    t = np.tanh(s * x + e)
    return 0.5 * (1 - t * t) * (np.cos(x) * x + s - 2 * x * e)


def bench_chain(n=10**6):
    x = np.random.default_rng(0).uniform(-3, 3, n)

    def f(x):
        return fnp.sum(fnp.tanh(fnp.sin(x) * x + fnp.exp(-x ** 2)) * 0.5)

    ref = chain_hand(x)
    fns = {"numpy (hand)": lambda: chain_hand(x)}
    interp = ft.grad(f)
    jitted = ft.jit(ft.grad(f), eager=True)
    t0 = time.perf_counter()
    out = jitted(x)
    compile_s = time.perf_counter() - t0
    check("chain jit", [out], [ref], 1e-12)
    check("chain interp", [interp(x)], [ref], 1e-12)
    fns["functrace interp"] = lambda: interp(x)
    fns["functrace jit"] = lambda: jitted(x)
    if autograd is not None:
        ag = autograd.grad(lambda x: anp.sum(anp.tanh(anp.sin(x) * x + anp.exp(-x ** 2)) * 0.5))
        check("chain autograd", [ag(x)], [ref], 1e-12)
        fns["autograd"] = lambda: ag(x)
    if jax is not None:
        def jf(x):
            return jnp.sum(jnp.tanh(jnp.sin(x) * x + jnp.exp(-x ** 2)) * 0.5)
        jx = jnp.asarray(x)
        je = jax.grad(jf)
        jj = jax.jit(jax.grad(jf))
        check("chain jax", [jj(jx)], [ref], 1e-12)
        fns["jax eager"] = lambda: je(jx).block_until_ready()
        fns["jax.jit"] = lambda: jj(jx).block_until_ready()
    if torch is not None:
        tx = torch.from_numpy(x)
        tg = torch.func.grad(lambda x: torch.sum(torch.tanh(torch.sin(x) * x +
                                                            torch.exp(-x ** 2)) * 0.5))
        fns["torch.func"] = lambda: tg(tx)
    report("chain grad 1e6 f64", interleaved(fns), note=f"compile {compile_s:.2f}s",
           target=0.25)


# --------------------------------------------------------------------------------------------
# 2. MLP
# --------------------------------------------------------------------------------------------

def mlp_hand(params, x, y):
    W1, b1, W2, b2 = params
    z1 = x @ W1 + b1
    h = np.tanh(z1)
    z2 = h @ W2 + b2
    m = z2.max(axis=1, keepdims=True)
    e = np.exp(z2 - m)
    s = e.sum(axis=1, keepdims=True)
    p = e / s
    n = x.shape[0]
    loss = -np.sum(y * (z2 - m - np.log(s))) / n
    dz2 = (p * y.sum(axis=1, keepdims=True) - y) / n
    dW2 = h.T @ dz2
    db2 = dz2.sum(axis=0)
    dh = dz2 @ W2.T
    dz1 = dh * (1 - h * h)
    dW1 = x.T @ dz1
    db1 = dz1.sum(axis=0)
    return loss, (dW1, db1, dW2, db2)


def mlp_loss(params, x, y):
    W1, b1, W2, b2 = params
    h = fnp.tanh(x @ W1 + b1)
    z = h @ W2 + b2
    lse = fnp.logsumexp(z, axis=1, keepdims=True)
    return -fnp.sum(y * (z - lse)) / x.shape[0]


def _jax_mlp_loss(p, x, y):
    """``mlp_loss`` in jax (the peer of the MLP workloads; call only when jax is there)."""
    W1, b1, W2, b2 = p
    h = jnp.tanh(x @ W1 + b1)
    z = h @ W2 + b2
    return -jnp.sum(y * (z - jlse(z, axis=1, keepdims=True))) / x.shape[0]


def bench_mlp(dtype):
    rng = np.random.default_rng(1)
    B, D, H, C = 256, 784, 512, 10
    params = (rng.normal(0, 0.05, (D, H)).astype(dtype), np.zeros(H, dtype),
              rng.normal(0, 0.05, (H, C)).astype(dtype), np.zeros(C, dtype))
    x = rng.normal(size=(B, D)).astype(dtype)
    y = np.eye(C, dtype=dtype)[rng.integers(0, C, B)]
    l_ref, g_ref = mlp_hand(params, x, y)
    tol = 1e-10 if dtype == np.float64 else 2e-4
    interp = ft.value_and_grad(mlp_loss)
    jitted = ft.jit(ft.value_and_grad(mlp_loss), eager=True)
    t0 = time.perf_counter()
    l, g = jitted(params, x, y)
    compile_s = time.perf_counter() - t0
    check("mlp jit", [l, *g], [l_ref, *g_ref], tol)
    assert all(gi.dtype == dtype for gi in g), "gradient dtype"
    l2, g2 = interp(params, x, y)
    check("mlp interp", [l2, *g2], [l_ref, *g_ref], tol)
    fns = {"numpy (hand)": lambda: mlp_hand(params, x, y),
           "functrace interp": lambda: interp(params, x, y),
           "functrace jit": lambda: jitted(params, x, y)}
    if autograd is not None:
        def aloss(p, x, y):
            W1, b1, W2, b2 = p
            h = anp.tanh(anp.dot(x, W1) + b1)
            z = anp.dot(h, W2) + b2
            return -anp.sum(y * (z - alse(z, axis=1, keepdims=True))) / x.shape[0]
        ag = autograd.value_and_grad(aloss)
        al, agr = ag(list(params), x, y)
        check("mlp autograd", [al, *agr], [l_ref, *g_ref], tol)
        fns["autograd"] = lambda: ag(list(params), x, y)
    if jax is not None:
        jloss = _jax_mlp_loss
        jp = tuple(jnp.asarray(p) for p in params)
        jx, jy = jnp.asarray(x), jnp.asarray(y)
        je = jax.value_and_grad(jloss)
        jj = jax.jit(jax.value_and_grad(jloss))
        jl, jg = jj(jp, jx, jy)
        check("mlp jax", [jl, *jg], [l_ref, *g_ref], tol)
        fns["jax eager"] = lambda: jax.block_until_ready(je(jp, jx, jy))
        fns["jax.jit"] = lambda: jax.block_until_ready(jj(jp, jx, jy))
    name = "mlp grad f32" if dtype == np.float32 else "mlp grad f64"
    report(name, interleaved(fns), note=f"compile {compile_s:.2f}s", target=1.0)


# --------------------------------------------------------------------------------------------
# 3. Hessian of the extended Rosenbrock function
# --------------------------------------------------------------------------------------------

def rosen(x, m=fnp):
    return m.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def rosen_hess(x):
    n = x.shape[0]
    H = np.zeros((n, n))
    d = np.zeros(n)
    d[:-1] = 1200 * x[:-1] ** 2 - 400 * x[1:] + 2
    d[1:] += 200
    off = -400 * x[:-1]
    H[np.arange(n), np.arange(n)] = d
    H[np.arange(n - 1), np.arange(1, n)] = off
    H[np.arange(1, n), np.arange(n - 1)] = off
    return H


def rosen_strided(x, m=fnp):
    a, b = x[0::2], x[1::2]
    return m.sum(100.0 * (b - a ** 2) ** 2 + (1.0 - a) ** 2)


def rosen_strided_hess(x):
    """The Hessian of ``rosen_strided``: independent (a, b) pairs, 2x2 blocks."""
    n = x.shape[0]
    a, b = x[0::2], x[1::2]
    H = np.zeros((n, n))
    i = np.arange(0, n, 2)
    H[i, i] = 1200 * a ** 2 - 400 * b + 2
    H[i, i + 1] = H[i + 1, i] = -400 * a
    H[i + 1, i + 1] = 200
    return H


def bench_hessian(n=200, strided=False):
    x = np.random.default_rng(2).uniform(-1, 1, n)
    rosen_fn, hess_fn = (rosen_strided, rosen_strided_hess) if strided else (rosen, rosen_hess)
    ref = hess_fn(x)
    interp = ft.hessian(rosen_fn)
    jitted = ft.jit(ft.hessian(rosen_fn), eager=True)
    t0 = time.perf_counter()
    out = jitted(x)
    compile_s = time.perf_counter() - t0
    check("hessian jit", [out], [ref], 1e-12)
    check("hessian interp", [interp(x)], [ref], 1e-12)
    fns = {"numpy (hand)": lambda: hess_fn(x), "functrace interp": lambda: interp(x),
           "functrace jit": lambda: jitted(x)}
    if autograd is not None:
        ah = autograd.hessian(lambda x: rosen_fn(x, anp))
        check("hessian autograd", [ah(x)], [ref], 1e-12)
        fns["autograd"] = lambda: ah(x)
    if jax is not None:
        jx = jnp.asarray(x)
        je = jax.hessian(lambda x: rosen_fn(x, jnp))
        jj = jax.jit(jax.hessian(lambda x: rosen_fn(x, jnp)))
        check("hessian jax", [jj(jx)], [ref], 1e-12)
        fns["jax eager"] = lambda: je(jx).block_until_ready()
        fns["jax.jit"] = lambda: jj(jx).block_until_ready()
    name = "hessian rosenbrock x[0::2] n=200" if strided else "hessian rosenbrock n=200"
    report(name, interleaved(fns, budget=0.1), note=f"compile {compile_s:.2f}s",
           target=None if strided else 4.2)


# --------------------------------------------------------------------------------------------
# 4. recurrence
# --------------------------------------------------------------------------------------------

def rnn_loss(W, xs, m=fnp):
    h = m.zeros(W.shape[0])
    for t in range(xs.shape[0]):
        h = m.tanh(W @ h + xs[t])
    return m.sum(h * h)


def rnn_hand(W, xs):
    T, n = xs.shape
    hs = [np.zeros(n)]
    for t in range(T):
        hs.append(np.tanh(W @ hs[-1] + xs[t]))
    dW = np.zeros_like(W)
    dh = 2 * hs[-1]
    for t in range(T, 0, -1):
        dz = dh * (1 - hs[t] * hs[t])
        dW += np.outer(dz, hs[t - 1])
        dh = W.T @ dz
    return dW


def bench_rnn(T=200, n=16):
    rng = np.random.default_rng(3)
    W = rng.normal(0, 0.3, (n, n))
    xs = rng.normal(size=(T, n))
    ref = rnn_hand(W, xs)
    interp = ft.grad(rnn_loss)
    jitted, out, compile_s = jit_cold(ft.grad(rnn_loss), W, xs)
    check("rnn jit", [out], [ref], 1e-12)
    check("rnn interp", [interp(W, xs)], [ref], 1e-12)
    fns = {"numpy (hand)": lambda: rnn_hand(W, xs), "functrace interp": lambda: interp(W, xs),
           "functrace jit": lambda: jitted(W, xs)}
    notes = f"compile {compile_s:.2f}s (cold cache)"
    if autograd is not None:
        ag = autograd.grad(lambda W, xs: rnn_loss(W, xs, anp))
        check("rnn autograd", [ag(W, xs)], [ref], 1e-12)
        fns["autograd"] = lambda: ag(W, xs)
    if jax is not None:
        jW, jxs = jnp.asarray(W), jnp.asarray(xs)
        jj = jax.jit(jax.grad(lambda W, xs: rnn_loss(W, xs, jnp)))
        t0 = time.perf_counter()
        jj(jW, jxs).block_until_ready()
        jc = time.perf_counter() - t0
        check("rnn jax", [jj(jW, jxs)], [ref], 1e-12)
        fns["jax.jit"] = lambda: jj(jW, jxs).block_until_ready()
        notes += f"; jax.jit compile {jc:.2f}s"
    report("rnn grad 200 steps", interleaved(fns, budget=0.1), note=notes, target=0.21)


# --------------------------------------------------------------------------------------------
# 4b. the same recurrence written with ft.scan, against a hand-written numba kernel
# --------------------------------------------------------------------------------------------

def rnn_scan_loss(W, xs):
    def step(h, x):
        return fnp.tanh(W @ h + x), None
    h, _ = ft.scan(step, fnp.zeros(W.shape[0]), xs)
    return fnp.sum(h * h)


def _rnn_numba_kernel():
    import numba

    @numba.njit(cache=False, error_model="numpy")
    def rnn_grad(W, xs):
        T, n = xs.shape
        hs = np.zeros((T + 1, n))
        for t in range(T):
            for i in range(n):
                s = xs[t, i]
                for k in range(n):
                    s += W[i, k] * hs[t, k]
                hs[t + 1, i] = np.tanh(s)
        dW = np.zeros_like(W)
        dh = 2.0 * hs[T]
        dz = np.empty(n)
        for t in range(T, 0, -1):
            for i in range(n):
                dz[i] = dh[i] * (1.0 - hs[t, i] * hs[t, i])
            for i in range(n):
                for k in range(n):
                    dW[i, k] += dz[i] * hs[t - 1, k]
            for k in range(n):
                s = 0.0
                for i in range(n):
                    s += W[i, k] * dz[i]
                dh[k] = s
        return dW
    return rnn_grad


def bench_scan_rnn(T=200, n=16):
    rng = np.random.default_rng(3)
    W = rng.normal(0, 0.3, (n, n))
    xs = rng.normal(size=(T, n))
    ref = rnn_hand(W, xs)
    hand = _rnn_numba_kernel()
    t0 = time.perf_counter()
    check("scan rnn numba", [hand(W, xs)], [ref], 1e-12)
    numba_s = time.perf_counter() - t0
    jitted, out, compile_s = jit_cold(ft.grad(rnn_scan_loss), W, xs)
    check("scan rnn jit", [out], [ref], 1e-12)
    interp = ft.grad(rnn_scan_loss)
    check("scan rnn interp", [interp(W, xs)], [ref], 1e-12)
    fns = {"numpy (hand)": lambda: rnn_hand(W, xs), "numba (hand)": lambda: hand(W, xs),
           "functrace interp": lambda: interp(W, xs), "functrace jit": lambda: jitted(W, xs)}
    notes = f"compile {compile_s:.2f}s (cold cache); numba hand kernel {numba_s:.2f}s"
    if jax is not None:
        def jloss(W, xs):
            def step(h, x):
                return jnp.tanh(W @ h + x), None
            h, _ = jax.lax.scan(step, jnp.zeros(W.shape[0]), xs)
            return jnp.sum(h * h)
        jW, jxs = jnp.asarray(W), jnp.asarray(xs)
        jj = jax.jit(jax.grad(jloss))
        t0 = time.perf_counter()
        jj(jW, jxs).block_until_ready()
        notes += f"; jax.jit(lax.scan) compile {time.perf_counter() - t0:.2f}s"
        check("scan rnn jax", [jj(jW, jxs)], [ref], 1e-12)
        fns["jax.jit(lax.scan)"] = lambda: jj(jW, jxs).block_until_ready()
    med = interleaved(fns, budget=0.1)
    report("scan rnn grad 200 steps", med, note=notes)
    print(f"scan rnn: functrace jit / numba hand kernel = "
          f"{med['functrace jit'] / med['numba (hand)']:.2f} (target <= 1.2)", flush=True)


# --------------------------------------------------------------------------------------------
# 5. logsumexp
# --------------------------------------------------------------------------------------------

def lse_hand(X):
    m = X.max(axis=1, keepdims=True)
    e = np.exp(X - m)
    return e / e.sum(axis=1, keepdims=True)


def bench_lse(n=1000):
    X = np.random.default_rng(4).normal(size=(n, n))
    ref = lse_hand(X)

    def f(X):
        return fnp.sum(fnp.logsumexp(X, axis=1))

    interp = ft.grad(f)
    jitted = ft.jit(ft.grad(f), eager=True)
    t0 = time.perf_counter()
    out = jitted(X)
    compile_s = time.perf_counter() - t0
    check("lse jit", [out], [ref], 1e-12)
    check("lse interp", [interp(X)], [ref], 1e-12)
    fns = {"numpy (hand)": lambda: lse_hand(X), "functrace interp": lambda: interp(X),
           "functrace jit": lambda: jitted(X)}
    if autograd is not None:
        ag = autograd.grad(lambda X: anp.sum(alse(X, axis=1)))
        check("lse autograd", [ag(X)], [ref], 1e-12)
        fns["autograd"] = lambda: ag(X)
    if jax is not None:
        jX = jnp.asarray(X)
        je = jax.grad(lambda X: jnp.sum(jlse(X, axis=1)))
        jj = jax.jit(je)
        check("lse jax", [jj(jX)], [ref], 1e-12)
        fns["jax eager"] = lambda: je(jX).block_until_ready()
        fns["jax.jit"] = lambda: jj(jX).block_until_ready()
    report("logsumexp grad 1000x1000", interleaved(fns), note=f"compile {compile_s:.2f}s",
           target=0.8)


def bench_softmax(n=1000):
    """The forward softmax over rows (ft.nn.softmax: one op, one exp per element) against
    the hand-written numpy and jax.nn.softmax."""
    X = np.random.default_rng(5).normal(size=(n, n))
    ref = lse_hand(X)
    jitted = ft.jit(lambda X: ft.nn.softmax(X, axis=1), eager=True)
    t0 = time.perf_counter()
    out = jitted(X)
    compile_s = time.perf_counter() - t0
    check("softmax jit", [out], [ref], 1e-12)
    fns = {"numpy (hand)": lambda: lse_hand(X), "functrace jit": lambda: jitted(X)}
    if jax is not None:
        jX = jnp.asarray(X)
        jj = jax.jit(lambda X: jax.nn.softmax(X, axis=1))
        check("softmax jax", [jj(jX)], [ref], 1e-12)
        fns["jax.jit"] = lambda: jj(jX).block_until_ready()
    report("softmax 1000x1000", interleaved(fns), note=f"compile {compile_s:.2f}s")


def xent_hand(z, y):
    m = z.max(axis=1, keepdims=True)
    e = np.exp(z - m)
    s = e.sum(axis=1, keepdims=True)
    n = z.shape[0]
    loss = -np.sum(y * (z - m - np.log(s))) / n
    return loss, (e / s * y.sum(axis=1, keepdims=True) - y) / n


def bench_xent(n=512, v=8192):
    """value_and_grad of the mean cross-entropy over a (512, 8192) logit matrix (a
    language-model head's loss): the softmax kernel's epilogue writes the gradient."""
    rng = np.random.default_rng(6)
    z = rng.normal(size=(n, v))
    y = np.eye(v)[rng.integers(0, v, n)]
    l_ref, g_ref = xent_hand(z, y)

    def loss(z, y):
        return -fnp.sum(y * ft.nn.log_softmax(z, axis=1)) / z.shape[0]
    jitted = ft.jit(ft.value_and_grad(loss), eager=True)
    t0 = time.perf_counter()
    l, g = jitted(z, y)
    compile_s = time.perf_counter() - t0
    check("xent jit", [l, g], [l_ref, g_ref], 1e-11)
    fns = {"numpy (hand)": lambda: xent_hand(z, y), "functrace jit": lambda: jitted(z, y)}
    if jax is not None:
        jz, jy = jnp.asarray(z), jnp.asarray(y)
        jj = jax.jit(jax.value_and_grad(
            lambda z, y: -jnp.sum(y * jax.nn.log_softmax(z, axis=1)) / z.shape[0]))
        jl, jg = jj(jz, jy)
        check("xent jax", [jl, jg], [l_ref, g_ref], 1e-11)
        fns["jax.jit"] = lambda: jax.block_until_ready(jj(jz, jy))
    report("cross-entropy value+grad 512x8192", interleaved(fns),
           note=f"compile {compile_s:.2f}s")


# --------------------------------------------------------------------------------------------
# 5b. exact arithmetic (no contraction, true divisions)
# --------------------------------------------------------------------------------------------

def arith_np(x, s):
    p = x * 0.1 + 0.2
    for c in (0.3, -0.4, 0.5, -0.6, 0.7, -0.8, 0.9):
        p = p * x + c
    return p, (x / 3.0 + x / s) / (x + 7.0)


def bench_arith(n=10**5):
    x = np.random.default_rng(5).uniform(-1, 1, n)
    s = np.asarray(1.7)
    jitted = ft.jit(arith_np, eager=True)
    t0 = time.perf_counter()
    out = jitted(x, s)
    compile_s = time.perf_counter() - t0
    for g, w in zip(out, arith_np(x, s), strict=True):   # bit for bit, not a tolerance
        if not np.array_equal(g, w):
            raise AssertionError("arith: ft.jit differs from numpy")
    fns = {"numpy (hand)": lambda: arith_np(x, s), "functrace jit": lambda: jitted(x, s)}
    if jax is not None:
        jj = jax.jit(arith_np)
        jx, js = jnp.asarray(x), jnp.asarray(s)
        fns["jax.jit"] = lambda: [a.block_until_ready() for a in jj(jx, js)]
    report("arith (8 mul-adds + divisions) 1e5 f64", interleaved(fns),
           note=f"compile {compile_s:.2f}s")


# --------------------------------------------------------------------------------------------
# 6. fresh process -> first gradient
# --------------------------------------------------------------------------------------------

_STARTUP = {
    "python+numpy (hand)": "import numpy as np\n"
    "x = np.linspace(-1, 1, 10000)\n"
    "s = np.sin(x); e = np.exp(-x*x); t = np.tanh(s*x + e)\n"
    "g = 0.5*(1 - t*t)*(np.cos(x)*x + s - 2*x*e)\n",
    "functrace interp": "import numpy as np, functrace as ft, functrace.numpy as fnp\n"
    "f = lambda x: fnp.sum(fnp.tanh(fnp.sin(x)*x + fnp.exp(-x**2))*0.5)\n"
    "g = ft.grad(f)(np.linspace(-1, 1, 10000))\n",
    "functrace jit": "import numpy as np, functrace as ft, functrace.numpy as fnp\n"
    "f = lambda x: fnp.sum(fnp.tanh(fnp.sin(x)*x + fnp.exp(-x**2))*0.5)\n"
    "g = ft.jit(ft.grad(f))(np.linspace(-1, 1, 10000))\n"
    "import sys; assert 'numba' in sys.modules  # warm disk cache: compiled on first call\n",
    "autograd": "import numpy as np, autograd, autograd.numpy as anp\n"
    "f = lambda x: anp.sum(anp.tanh(anp.sin(x)*x + anp.exp(-x**2))*0.5)\n"
    "g = autograd.grad(f)(np.linspace(-1, 1, 10000))\n",
    "jax.jit": "import numpy as np, jax, jax.numpy as jnp\n"
    "jax.config.update('jax_enable_x64', True)\n"
    "f = lambda x: jnp.sum(jnp.tanh(jnp.sin(x)*x + jnp.exp(-x**2))*0.5)\n"
    "g = jax.jit(jax.grad(f))(np.linspace(-1, 1, 10000)).block_until_ready()\n",
}


def bench_startup():
    """Fresh process to first gradient, subprocess wall time. Measured as users run Python:
    with its bytecode cache (each contender runs once first, which writes the ``.pyc``
    files, even where this shell sets ``PYTHONDONTWRITEBYTECODE``, as this sandbox does).
    Then, without targets, with no bytecode cache at all (an empty ``PYTHONPYCACHEPREFIX``,
    nothing written): every module of every contender compiled from source at each start,
    as on a fresh machine under that setting."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    base = dict(os.environ, PYTHONPATH=root)
    base.pop("PYTHONPYCACHEPREFIX", None)
    cached = {k: v for k, v in base.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as d, tempfile.TemporaryDirectory() as nopyc:
        for env in (base, cached):
            env["FUNCTRACE_CACHE_DIR"] = d
        conditions = {"startup: first gradient (s)": cached,
                      "startup, no bytecode cache (s)": dict(
                          base, PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=nopyc)}
        # populate the disk cache once (the "warm disk cache" condition)
        subprocess.run([sys.executable, "-c", _STARTUP["functrace jit"].replace(
            "ft.jit(ft.grad(f))", "ft.jit(ft.grad(f), eager=True)")], env=base, check=True)
        for workload, env in conditions.items():
            codes = {k: code for k, code in _STARTUP.items()
                     if not ((k == "autograd" and autograd is None)
                             or (k == "jax.jit" and jax is None))}
            for code in codes.values():          # warm-up: bytecode written where allowed
                subprocess.run([sys.executable, "-c", code], env=env, check=True)
            times = {k: [] for k in codes}
            for _ in range(3 if QUICK else 5):
                for k, code in codes.items():
                    t0 = time.perf_counter()
                    subprocess.run([sys.executable, "-c", code], env=env, check=True)
                    times[k].append(time.perf_counter() - t0)
            med = {k: statistics.median(v) for k, v in times.items() if v}
            for k, t in med.items():
                target = {"functrace jit": 0.85, "functrace interp": 0.3}.get(k) \
                    if env is cached else None
                ROWS.append((workload, k, t, t / med["python+numpy (hand)"],
                             "absolute seconds; target is absolute" if target else "", target))


# --------------------------------------------------------------------------------------------
# 7. memory
# --------------------------------------------------------------------------------------------

def bench_memory(n=10**7):
    x = np.random.default_rng(5).uniform(-3, 3, n)

    def f(x):
        return fnp.sum(fnp.tanh(fnp.sin(x) * x + fnp.exp(-x ** 2)) * 0.5)

    jitted = ft.jit(ft.grad(f), eager=True)
    jitted(x)                                  # compile, pools made
    res = {}
    for name, fn in (("functrace jit", lambda: jitted(x)), ("numpy (hand)",
                                                            lambda: chain_hand(x))):
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        out = fn()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        del out
        # the input itself is live throughout: count it
        res[name] = (peak - base + x.nbytes) / x.nbytes
    for k, v in res.items():
        ROWS.append(("peak memory, chain grad 1e7 (x input size)", k, v,
                     v / res["numpy (hand)"], "", 2.5 if k == "functrace jit" else None))


# --------------------------------------------------------------------------------------------
# 8. thread scaling (--threads N): functrace and jax.jit at 1 and N threads
# --------------------------------------------------------------------------------------------

def _scaling_workloads():
    """name -> (functrace function, its arguments, jax function or None, reference)."""
    rng = np.random.default_rng(11)
    out = {}

    def chain(x):
        return fnp.sum(fnp.tanh(fnp.sin(x) * x + fnp.exp(-x ** 2)) * 0.5)
    x = rng.uniform(-3, 3, 4 * 10**6)
    jchain = None
    if jax is not None:
        def jchain(x):
            return jnp.sum(jnp.tanh(jnp.sin(x) * x + jnp.exp(-x ** 2)) * 0.5)
        jchain = jax.grad(jchain)
    out["chain grad 4e6 f64"] = (ft.grad(chain), (x,), jchain, chain_hand(x))

    B, D, H, C = 1024, 784, 512, 10
    params = (rng.normal(0, 0.05, (D, H)), np.zeros(H), rng.normal(0, 0.05, (H, C)),
              np.zeros(C))
    xm = rng.normal(size=(B, D))
    y = np.eye(C)[rng.integers(0, C, B)]
    jmlp = None
    if jax is not None:
        jmlp = jax.grad(_jax_mlp_loss)
    out["mlp grad 1024x784x512 f64"] = (ft.grad(mlp_loss), (params, xm, y), jmlp,
                                         mlp_hand(params, xm, y)[1])

    X = rng.normal(size=(2000, 2000))

    def lse(X):
        return fnp.sum(fnp.logsumexp(X, axis=1))
    jl = jax.grad(lambda X: jnp.sum(jlse(X, axis=1))) if jax is not None else None
    out["logsumexp grad 2000x2000"] = (ft.grad(lse), (X,), jl, lse_hand(X))

    xa = rng.uniform(-1, 1, 4 * 10**6)
    sa = np.asarray(1.7)
    out["arith 4e6 f64"] = (arith_np, (xa, sa), arith_np if jax is not None else None,
                            arith_np(xa, sa))

    def colsum(X):
        return fnp.sum(fnp.exp(-X * X) * X, axis=0)
    jc = (lambda X: jnp.sum(jnp.exp(-X * X) * X, axis=0)) if jax is not None else None
    out["column sums 2000x2000 (outer axis)"] = (colsum, (X,), jc,
                                                  np.sum(np.exp(-X * X) * X, axis=0))
    return out


def _flat(tree):
    if isinstance(tree, list | tuple):
        return [leaf for t in tree for leaf in _flat(t)]
    return [np.asarray(tree)]


def scaling_worker(n: int, only: list[str]) -> dict:
    """In a process started with ``n`` threads (``_thread_env``): medians of functrace jit at
    ``n`` threads and at 1, and of jax.jit (XLA at ``n`` threads), interleaved."""
    res = {}
    for name, (f, args, jf, ref) in _scaling_workloads().items():
        if only and not any(o in name for o in only):
            continue
        fns = {}
        ftn = ft.jit(f, eager=True, threads=n)
        check_close(f"{name} functrace", _flat(ftn(*args)), _flat(ref), 1e-10)
        fns["functrace"] = lambda ftn=ftn, args=args: ftn(*args)
        if n > 1:
            ft1 = ft.jit(f, eager=True, threads=1)
            fns["functrace 1 thread (same process)"] = lambda ft1=ft1, args=args: ft1(*args)
        if jf is not None:
            jj = jax.jit(jf)
            jargs = jax.tree_util.tree_map(jnp.asarray, args)
            check_close(f"{name} jax", _flat(jax.device_get(jj(*jargs))), _flat(ref), 1e-10)
            fns["jax.jit"] = lambda jj=jj, jargs=jargs: jax.block_until_ready(jj(*jargs))
        res[name] = interleaved(fns, rounds=5, budget=0.2)
    if n > 1 and (not only or "launch" in only):
        res["parallel launch, 1e3 elements"] = _launch_overhead(n)
    return res


def _launch_overhead(n: int) -> dict:
    """A 1000-element kernel forced parallel (``FUNCTRACE_PARALLEL_MIN_WORK=0``) on ``n``
    threads and on one: the difference of the medians is the cost of a parallel launch."""
    os.environ["FUNCTRACE_PARALLEL_MIN_WORK"] = "0"
    try:
        x = np.ones(1000)
        fp = ft.jit(lambda x: x * 2.0 + 1.0, eager=True, threads=n)
        fs = ft.jit(lambda x: x * 2.0 + 1.0, eager=True, threads=1)
        fp(x), fs(x)
    finally:
        del os.environ["FUNCTRACE_PARALLEL_MIN_WORK"]
    return interleaved({"functrace": lambda: fp(x),
                        "functrace 1 thread (same process)": lambda: fs(x)}, rounds=9,
                       budget=0.05)


def _compile_worker(threads) -> dict:
    """Cold compile (empty kernel cache, numba already loaded) of each scaling workload with
    ``threads``: seconds of the first call and of the second (which compiles the parallel
    kernel variants)."""
    out = {}
    ft.jit(lambda x: fnp.exp(x) * 2.0, eager=True)(np.ones(3))   # numba loaded, not timed
    for name, (f, args, _jf, _ref) in _scaling_workloads().items():
        jf = ft.jit(f, eager=True, threads=threads)
        t0 = time.perf_counter()
        jf(*args)
        t1 = time.perf_counter()
        jf(*args)
        out[name] = (t1 - t0, time.perf_counter() - t1)
    return out


def _run_self(args: list[str], env=None) -> dict:
    out = subprocess.run([sys.executable, os.path.abspath(__file__), *args], env=env,
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_threads(n: int, only: list[str], repeats: int = 2):
    """Thread scaling, functrace against jax.jit: workers at 1 and at ``n`` threads, run in
    turn ``repeats`` times (XLA's thread count is fixed when a process starts); medians of
    the workers' medians; speedup = time at 1 thread / time at n. Then cold compile times
    with threads="auto" and False, each in a fresh process and kernel cache."""
    runs: dict = {1: [], n: []}
    for _ in range(repeats):
        for t in (1, n):
            runs[t].append(_run_self(["--_worker", str(t), "--only", ",".join(only)]))
    med = {}
    for t, rs in runs.items():
        for name in rs[0]:
            for k in rs[0][name]:
                med[(t, name, k)] = statistics.median(r[name][k] for r in rs)
    print(_blas.describe())
    print("(ft x: functrace 1-thread worker / n-thread worker; ft x same: functrace threads=1 /"
          " threads=n in the n-thread worker; jax x: XLA 1-thread worker / n-thread worker; "
          "ft/jax: time ratio at n threads, < 1 means functrace is faster)")
    print(f"\nthread scaling, 1 -> {n} threads ({os.cpu_count()} cores here; "
          f"{repeats} worker processes per count, medians)")
    print(f"{'workload':<36} {'ft 1':>9} {'ft ' + str(n):>9} {'ft x':>6} {'ft x same':>9} "
          f"{'jax 1':>9} {'jax ' + str(n):>9} {'jax x':>6} {'ft/jax@' + str(n):>9}")
    for name in runs[n][0]:
        fn = med[(n, name, "functrace")]
        f1 = med.get((1, name, "functrace"), med.get((n, name, "functrace 1 thread "
                                                          "(same process)")))
        same = med.get((n, name, "functrace 1 thread (same process)"), float("nan")) / fn
        j1, jn = med.get((1, name, "jax.jit"), float("nan")), med.get((n, name, "jax.jit"),
                                                                       float("nan"))
        print(f"{name:<36} {f1 * 1e3:8.2f}m {fn * 1e3:8.2f}m {f1 / fn:6.2f} {same:9.2f} "
              f"{j1 * 1e3:8.2f}m {jn * 1e3:8.2f}m {j1 / jn:6.2f} {fn / jn:9.2f}")
    with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d2:
        env = dict(os.environ)
        comp = {}
        for label, d in (("auto", d1), ("False", d2)):
            env["FUNCTRACE_CACHE_DIR"] = d
            comp[label] = _run_self(["--_worker", str(n), "--_compile", label], env=env)
    print(f"\ncold compile (s, empty kernel cache), threads='auto' ({n} threads) vs False: "
          f"first call, second call (parallel variants compiled then)")
    for name in comp["auto"]:
        (a1, a2), (f1, f2) = comp["auto"][name], comp["False"][name]
        print(f"{name:<36} auto {a1:6.2f} + {a2:6.2f}   False {f1:6.2f} + {f2:6.2f}")


def print_table():
    print()
    print(f"{'workload':<44} {'backend':<20} {'median':>12} {'ratio':>8}  target  note")
    last = None
    for wl, k, t, r, note, target in ROWS:
        if wl != last:
            print("-" * 110)
            last = wl
        if "memory" in wl:
            val = f"{t:9.2f} x "
        elif "startup" in wl:
            val = f"{t:10.3f} s"
        else:
            val = f"{t * 1e3:9.3f} ms"
        tgt = ""
        if target is not None:
            metric = t if ("startup" in wl or "memory" in wl) else r
            tgt = f"{'met ' if metric <= target else 'MISS'} {target}"
        print(f"{wl:<44} {k:<20} {val:>12} {r:8.3f}  {tgt:<9} {note}")


def main():
    global QUICK
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="fewer rounds")
    p.add_argument("--only", default="", help="comma-separated workloads")
    p.add_argument("--threads", default=None,
                   help="thread scaling: N (an int) or 'all'; functrace and jax.jit at 1 and N "
                        "threads")
    p.add_argument("--repeats", type=int, default=2, help="worker processes per thread count")
    p.add_argument("--_worker", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--_compile", default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    QUICK = a.quick
    only = [s for s in a.only.split(",") if s]
    if a._worker is not None:     # a worker of a --threads run: one JSON line
        if a._compile is not None:
            res = _compile_worker(False if a._compile == "False" else a._compile)
        else:
            res = scaling_worker(a._worker, only)
        print(json.dumps(res))
        return
    if a.threads is not None:
        n = len(os.sched_getaffinity(0)) if a.threads == "all" else int(a.threads)
        bench_threads(n, only, a.repeats)
        return
    print(f"numpy {np.__version__}; jax {getattr(jax, '__version__', '-')}; autograd "
          f"{'yes' if autograd else '-'}; torch {getattr(torch, '__version__', '-')}; "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}")
    print(_blas.describe())
    benches = {"chain": bench_chain, "mlp32": lambda: bench_mlp(np.float32),
               "mlp64": lambda: bench_mlp(np.float64), "hessian": bench_hessian,
               "hessian_strided": lambda: bench_hessian(strided=True),
               "rnn": bench_rnn, "scan_rnn": bench_scan_rnn, "lse": bench_lse,
               "softmax": bench_softmax, "xent": bench_xent, "arith": bench_arith,
               "startup": bench_startup,
               "memory": bench_memory}
    for name, fn in benches.items():
        if only and name not in only:
            continue
        t0 = time.perf_counter()
        try:
            fn()
        except Exception as exc:
            print(f"[{name} FAILED: {type(exc).__name__}: {exc}]", flush=True)
            continue
        print(f"[{name} done in {time.perf_counter() - t0:.1f}s]", flush=True)
    print_table()


if __name__ == "__main__":
    main()
