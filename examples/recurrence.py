"""Gradients through a Python loop: a 200-step recurrent network, compiled with ft.jit.

Tracing unrolls the loop (200 copies of the step, and 200 more for the gradient); the CPU
executor rolls the copies back into two compiled loops (forward and backward), so the
compiled gradient costs one numba function per loop instead of a Python step per equation.

Run:  python examples/recurrence.py
"""

import time

import numpy as np

import functrace as ft
import functrace.numpy as fnp


def loss(W, xs):
    h = fnp.zeros(W.shape[0])
    for t in range(xs.shape[0]):          # an ordinary Python loop over time steps
        h = fnp.tanh(W @ h + xs[t])
    return fnp.sum(h * h)


def loss_grad_by_hand(W, xs):
    hs = [np.zeros(W.shape[0])]
    for t in range(xs.shape[0]):
        hs.append(np.tanh(W @ hs[-1] + xs[t]))
    dW, dh = np.zeros_like(W), 2 * hs[-1]
    for t in range(xs.shape[0], 0, -1):
        dz = dh * (1 - hs[t] ** 2)
        dW += np.outer(dz, hs[t - 1])
        dh = W.T @ dz
    return dW


def main():
    rng = np.random.default_rng(0)
    W = rng.normal(0, 0.3, (16, 16))
    xs = rng.normal(size=(200, 16))

    step = ft.jit(ft.grad(loss))
    lowered = step.lower(W, xs)
    n_loops = lowered.source.count("\ndef loop(")
    print(f"traced gradient: {len(lowered.graph.eqns)} equations; "
          f"the executor runs it as {n_loops} compiled loops")
    assert n_loops == 2

    t0 = time.perf_counter()
    g = lowered.compile()(W, xs)          # compile now (otherwise: on the second call)
    print(f"compiled in {time.perf_counter() - t0:.2f} s (kernels are cached on disk)")
    want = loss_grad_by_hand(W, xs)
    assert np.allclose(g, want, rtol=1e-12, atol=1e-14)
    print("matches the hand-derived gradient")

    def per_call(f, n=20):
        f(W, xs)                          # the first call of step traces (lower() did not)
        t = time.perf_counter()
        for _ in range(n):
            f(W, xs)
        return (time.perf_counter() - t) / n * 1e3
    print(f"ft.jit(ft.grad(loss)): {per_call(step):.3f} ms per call, "
          f"numpy by hand: {per_call(loss_grad_by_hand):.3f} ms")


if __name__ == "__main__":
    main()
