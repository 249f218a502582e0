"""The softmax op (``ops.softmax``): its rules, which logsumexp's derivatives now use, against
analytic answers, finite differences and autograd; batching; the all -inf conventions."""

from __future__ import annotations

import numpy as np
import pytest

import functrace as ft
import functrace.numpy as fnp
import functrace.scipy.special as fsp
from functrace.test_util import check_grads


def _softmax_np(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("jit", [False, True])
def test_logsumexp_hessian_is_diag_p_minus_p_pt(jit):
    x = np.random.default_rng(0).normal(size=7) * 3
    h = ft.hessian(lambda x: fnp.logsumexp(x))
    h = ft.jit(h, eager=True) if jit else h
    p = _softmax_np(x, 0)
    np.testing.assert_allclose(h(x), np.diag(p) - np.outer(p, p), rtol=1e-13, atol=1e-16)


def test_logsumexp_and_softmax_derivatives_against_finite_differences():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 5))
    w = rng.normal(size=(3, 5))
    check_grads(lambda x: fnp.logsumexp(x, axis=1), (x,), order=3, modes=("rev", "fwd"))
    check_grads(lambda x: ft.nn.softmax(x, axis=1) * w, (x,), order=2, modes=("rev", "fwd"))
    check_grads(lambda x: fsp.softmax(x), (x,), order=2, modes=("rev", "fwd"))


def test_softmax_gradients_against_autograd():
    autograd = pytest.importorskip("autograd")
    anp = pytest.importorskip("autograd.numpy")
    rng = np.random.default_rng(2)
    x = rng.normal(size=(4, 6))
    w = rng.normal(size=(4, 6))

    def a_loss(x):
        e = anp.exp(x - anp.max(x, axis=0, keepdims=True))
        return anp.sum(anp.sin(e / anp.sum(e, axis=0, keepdims=True)) * w)

    def f_loss(x):
        return fnp.sum(fnp.sin(ft.nn.softmax(x, axis=0)) * w)

    want = autograd.grad(a_loss)(x)
    np.testing.assert_allclose(ft.grad(f_loss)(x), want, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(ft.jit(ft.grad(f_loss), eager=True)(x), want, rtol=1e-12,
                               atol=1e-15)
    hv = rng.normal(size=x.shape)
    want2 = autograd.grad(lambda x: anp.sum(autograd.grad(a_loss)(x) * hv))(x)
    got2 = ft.grad(lambda x: fnp.sum(ft.grad(f_loss)(x) * hv))(x)
    np.testing.assert_allclose(got2, want2, rtol=1e-11, atol=1e-14)


@pytest.mark.parametrize("axis", [0, -1, 1])
def test_vmap_of_softmax_equals_a_loop(axis):
    xs = np.random.default_rng(3).normal(size=(4, 3, 5))
    got = ft.vmap(lambda x: ft.nn.softmax(x, axis=axis))(xs)
    want = np.stack([_softmax_np(x, axis) for x in xs])
    np.testing.assert_allclose(got, want, rtol=1e-14)
    got = ft.jit(ft.vmap(ft.grad(lambda x: fnp.sum(ft.nn.softmax(x, axis=axis)[0] ** 2))),
                 eager=True)(xs)
    want = np.stack([ft.grad(lambda x: fnp.sum(ft.nn.softmax(x, axis=axis)[0] ** 2))(x)
                     for x in xs])
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-16)


def test_rows_of_all_minus_inf():
    # ft.nn.softmax and fsp.softmax: NaN there, as scipy and jax give; logsumexp's first and
    # second derivatives: 0 there (docs/numerics.md), eager, traced and compiled alike
    X = np.array([[-np.inf, -np.inf, -np.inf], [0.0, 1.0, -np.inf]])
    for f in (ft.nn.softmax, ft.jit(ft.nn.softmax, eager=True),
              lambda x: fsp.softmax(x, axis=1), ft.jit(lambda x: fsp.softmax(x, axis=1))):
        y = f(X)
        assert np.isnan(y[0]).all()
        np.testing.assert_allclose(y[1], [0.2689414213699951, 0.7310585786300049, 0.0],
                                   rtol=1e-15)
    lse = lambda x: fnp.sum(fnp.logsumexp(x, axis=1))  # noqa: E731
    for g in (ft.grad(lse), ft.jit(ft.grad(lse), eager=True)):
        d = g(X)
        np.testing.assert_array_equal(d[0], 0.0)
        np.testing.assert_allclose(d[1], [0.2689414213699951, 0.7310585786300049, 0.0])
    for h in (ft.hessian(lambda x: fnp.logsumexp(x)),
              ft.jit(ft.hessian(lambda x: fnp.logsumexp(x)), eager=True)):
        np.testing.assert_array_equal(h(X[0]), np.zeros((3, 3)))


def test_softmax_of_non_float_input_and_bad_axis():
    np.testing.assert_allclose(ft.nn.softmax(np.array([0, 0])), [0.5, 0.5])
    np.testing.assert_allclose(ft.jit(ft.nn.softmax)(np.array([0, 0])), [0.5, 0.5])
    with pytest.raises(np.exceptions.AxisError):
        ft.nn.softmax(np.zeros((2, 3)), axis=2)
    with pytest.raises(np.exceptions.AxisError):
        ft.jit(lambda x: ft.nn.softmax(x, axis=-3))(np.zeros((2, 3)))
