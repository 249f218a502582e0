"""vmap, Hessian and per-example-gradient timings with peers in the same run.

Run:  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/bench_transforms.py

Rows (medians of repeated timings; ratios against the peer named in the row):
* vmap(f) over a batch of 256 on the reference interpreter vs f written by hand for the batch
* full Hessian of the extended Rosenbrock function, n=200: functrace (interpreter tier) vs
  the analytic numpy Hessian, autograd, JAX eager and jax.jit (when installed)
* per-example gradients of an MLP loss for 256 examples vs jax.jit(vmap(grad)) and a loop,
  on the interpreter and under ft.jit
Every result is checked against the reference answer before it is timed.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

from _timing import median_time

import functrace as ft
import functrace.numpy as fnp


def rosen(mod):
    def f(x):
        return mod.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)
    return f


def rosen_hessian(x):
    n = len(x)
    d = np.zeros(n)
    d[:-1] += 1200 * x[:-1] ** 2 - 400 * x[1:] + 2
    d[1:] += 200
    off = -400 * x[:-1]
    return np.diag(d) + np.diag(off, 1) + np.diag(off, -1)


def main():
    rng = np.random.default_rng(0)
    rows = []

    # 1. vmap vs hand-batched
    W1, b1 = rng.standard_normal((64, 32)) * 0.2, rng.standard_normal(64)
    W2 = rng.standard_normal((10, 64)) * 0.2

    def per_example(x):
        h = fnp.tanh(W1 @ x + b1)
        return fnp.logsumexp(W2 @ h) - fnp.sum(h * h) * 0.01

    def by_hand(X):
        H = np.tanh(X @ W1.T + b1)
        Z = H @ W2.T
        m = Z.max(axis=1, keepdims=True)
        return (np.log(np.exp(Z - m).sum(axis=1)) + m[:, 0]) - np.sum(H * H, axis=1) * 0.01
    X = rng.standard_normal((256, 32))
    vf = ft.vmap(per_example)
    np.testing.assert_allclose(vf(X), by_hand(X), rtol=1e-12)
    t_v = median_time(lambda: vf(X))
    t_h = median_time(lambda: by_hand(X))
    rows.append(("vmap(f), batch 256 / hand-batched numpy", t_v, t_h))

    # 2. Hessian of Rosenbrock n=200
    x = rng.uniform(-1, 1, 200)
    ref = rosen_hessian(x)
    h = ft.hessian(rosen(fnp))
    np.testing.assert_allclose(h(x), ref, rtol=1e-12, atol=1e-9)
    t_ft = median_time(lambda: h(x))
    t_an = median_time(lambda: rosen_hessian(x))
    rows.append(("Hessian n=200: functrace / analytic numpy", t_ft, t_an))
    hj = ft.jit(ft.hessian(rosen(fnp)))
    np.testing.assert_allclose(hj(x), ref, rtol=1e-12, atol=1e-9)
    hj(x)
    t_hj = median_time(lambda: hj(x))
    rows.append(("Hessian n=200: ft.jit / analytic numpy", t_hj, t_an))
    try:
        import autograd
        import autograd.numpy as anp
        ah = autograd.hessian(rosen(anp))
        np.testing.assert_allclose(ah(x), ref, rtol=1e-10, atol=1e-8)
        rows.append(("Hessian n=200: functrace / autograd", t_ft,
                     median_time(lambda: ah(x), repeat=3)))
    except ImportError:
        pass
    have_jax = False
    try:
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_enable_x64", True)
        have_jax = True
        jh = jax.hessian(rosen(jnp))
        np.testing.assert_allclose(np.asarray(jh(x)), ref, rtol=1e-10, atol=1e-8)
        rows.append(("Hessian n=200: functrace / jax eager", t_ft,
                     median_time(lambda: jh(x).block_until_ready(), repeat=3)))
        jj = jax.jit(jh)
        jj(x).block_until_ready()
        t_jj = median_time(lambda: jj(x).block_until_ready())
        rows.append(("Hessian n=200: ft.jit / jax.jit", t_hj, t_jj))
    except ImportError:
        pass

    # 3. per-example gradients of an MLP loss, 256 examples
    P = {"w1": rng.standard_normal((32, 64)) * 0.2, "w2": rng.standard_normal((64, 10)) * 0.2}
    Y = ft.nn.one_hot(rng.integers(0, 10, 256), 10)

    def loss(p, x, y):
        h = fnp.tanh(x @ p["w1"])
        return -fnp.sum(ft.nn.log_softmax(h @ p["w2"]) * y)

    pe = ft.vmap(ft.grad(loss), in_axes=(None, 0, 0))
    got = pe(P, X, Y)
    loop = [ft.grad(loss)(P, x, y) for x, y in zip(X[:4], Y[:4])]
    np.testing.assert_allclose(got["w1"][:4], [g["w1"] for g in loop], rtol=1e-12)
    t_pe = median_time(lambda: pe(P, X, Y))
    t_loop = median_time(lambda: [ft.grad(loss)(P, x, y) for x, y in zip(X, Y)], repeat=3)
    rows.append(("per-example grads: vmap(grad) / loop of grad", t_pe, t_loop))
    pej = ft.jit(pe)
    np.testing.assert_allclose(pej(P, X, Y)["w1"], got["w1"], rtol=1e-12)
    pej(P, X, Y)
    t_pej = median_time(lambda: pej(P, X, Y))
    if have_jax:
        def jloss(p, x, y):
            h = jnp.tanh(x @ p["w1"])
            return -jnp.sum(jax.nn.log_softmax(h @ p["w2"]) * y)
        jpe = jax.jit(jax.vmap(jax.grad(jloss), in_axes=(None, 0, 0)))
        jpe(P, X, Y)["w1"].block_until_ready()
        np.testing.assert_allclose(np.asarray(jpe(P, X, Y)["w1"]), got["w1"], rtol=1e-10)
        t_jpe = median_time(lambda: jpe(P, X, Y)["w1"].block_until_ready())
        rows.append(("per-example grads: functrace interp / jax.jit", t_pe, t_jpe))
        rows.append(("per-example grads: ft.jit / jax.jit", t_pej, t_jpe))

    print(f"{'measure':<50}{'functrace':>12}{'peer':>12}{'ratio':>8}")
    for name, a, b in rows:
        print(f"{name:<50}{a * 1e3:>10.3f}ms{b * 1e3:>10.3f}ms{a / b:>8.2f}")


if __name__ == "__main__":
    main()
