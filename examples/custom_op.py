"""Define new primitives with functrace.extend: an elementwise op and a general one.

Run:  python examples/custom_op.py

``define_elementwise`` takes the numpy function (the definition every backend is checked
against), the same function of Python scalars (numba compiles it into the CPU and CUDA
kernels, fused with the neighbouring ops) and the derivative written with functrace.numpy
(so it differentiates again). ``define_op`` takes an impl, a shape rule and the rules you need.
"""

import math

import numpy as np

import functrace as ft
import functrace.numpy as fnp
from functrace.extend import define_elementwise, define_op

# log(1 + e^x), stable for large |x|
softplus = define_elementwise(
    "example_softplus", lambda x: np.logaddexp(0.0, x),
    scalar=lambda x: math.log1p(math.exp(-abs(x))) + max(x, 0.0),
    derivative=lambda x, y: 1 / (1 + fnp.exp(-x)))


def _rcumsum_impl(x, *, axis):
    return np.flip(np.cumsum(np.flip(x, axis), axis=axis), axis)


def _rcumsum_batch(args, dims, *, axis):
    (x,), (d,) = args, dims
    x = fnp.moveaxis(x, d, 0)
    return rcumsum(x, axis=axis % (x.ndim - 1) + 1), 0


# the sum of each element and everything after it along ``axis``
rcumsum = define_op(
    "example_rcumsum", _rcumsum_impl, lambda x, *, axis: (x.shape, x.dtype),
    vjp=lambda cts, ins, outs, *, axis: (fnp.cumsum(cts[0], axis=axis),),
    jvp=lambda primals, tangents, outs, *, axis: (rcumsum(tangents[0], axis=axis),),
    batch=_rcumsum_batch)


def loss(w, x):
    return fnp.sum(rcumsum(softplus(x @ w), axis=1))


def main():
    rng = np.random.default_rng(0)
    w, x = rng.normal(size=(4, 3)), rng.normal(size=(8, 4))
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731

    # eager, traced and printed like any op
    print(ft.trace(loss)(w, x))
    z = x @ w
    want = np.flip(np.cumsum(np.flip(np.logaddexp(0, z), 1), axis=1), 1).sum()
    assert np.isclose(loss(w, x), want)

    # gradients (and second derivatives) through both ops
    g = ft.grad(loss)(w, x)
    counts = np.arange(1, 4.0)                       # element j is summed j+1 times
    assert np.allclose(g, x.T @ (sig(z) * counts))
    d2 = ft.grad(ft.grad(lambda t: softplus(t)))(0.7)
    assert np.isclose(d2, sig(0.7) * (1 - sig(0.7)))

    # vmap and jvp
    per_row = ft.vmap(lambda r: rcumsum(softplus(r), axis=0))(z)
    assert np.allclose(per_row, np.flip(np.cumsum(np.flip(np.logaddexp(0, z), 1), 1), 1))
    _, t = ft.jvp(softplus, (z,), (np.ones_like(z),))
    assert np.allclose(t, sig(z))

    # compiled: softplus runs inside the fused CPU kernel with its neighbours
    f = ft.jit(lambda x: softplus(fnp.sin(x)) * 2.0)
    xs = np.linspace(-3, 3, 1000)
    assert np.allclose(f(xs), np.logaddexp(0, np.sin(xs)) * 2.0)
    assert "log1p(math.exp(-abs(x)))" in f.lower(xs).source
    # a saved graph names the module that defines its extension ops
    assert '"module": "__main__"' in ft.trace(loss)(w, x).to_json()
    print("ok")


if __name__ == "__main__":
    main()
