"""API details that JAX and autograd programs rely on (issue #18): each test is one thing a
port written for JAX or autograd does, checked against an analytic value, finite differences
or autograd itself."""

import numpy as np
import pytest

import functrace as ft
import functrace.numpy as fnp

rng = np.random.default_rng(18)


# ---- ft.vjp(..., has_aux=True) returns (out, vjp_fn, aux), as jax.vjp ----------------------

def test_vjp_has_aux_returns_out_vjp_fn_aux():
    x = np.array([0.5, 1.5])

    def f(x):
        return fnp.sin(x) * x, {"sq": x ** 2, "n": 3}

    res = ft.vjp(f, x, has_aux=True)
    assert len(res) == 3
    out, vjp_fn, aux = res
    np.testing.assert_allclose(out, np.sin(x) * x)
    assert type(aux["sq"]) is np.ndarray                 # aux is a plain value, not a tracer
    np.testing.assert_allclose(aux["sq"], x ** 2)
    assert aux["n"] == 3
    (g,) = vjp_fn(np.ones(2))
    np.testing.assert_allclose(g, np.cos(x) * x + np.sin(x), rtol=1e-14)


def test_vjp_has_aux_under_jit_and_grad():
    x = np.array([0.5, 1.5])

    def f(x):
        return x ** 3, fnp.sum(x)

    def pulled(x):
        out, vjp_fn, aux = ft.vjp(f, x, has_aux=True)
        (g,) = vjp_fn(np.ones(2))
        return fnp.sum(g) + aux

    want = np.sum(3 * x ** 2) + np.sum(x)
    np.testing.assert_allclose(pulled(x), want, rtol=1e-14)
    np.testing.assert_allclose(ft.jit(pulled)(x), want, rtol=1e-14)
    np.testing.assert_allclose(ft.grad(pulled)(x), 6 * x + 1, rtol=1e-14)


def test_vjp_has_aux_requires_a_pair():
    with pytest.raises(TypeError, match="pair"):
        ft.vjp(lambda x: x * 2, np.ones(2), has_aux=True)
