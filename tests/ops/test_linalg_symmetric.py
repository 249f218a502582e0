"""The gradient convention of the functions that read one triangle of a Hermitian input
(``fnp.linalg.cholesky``, ``eigh``, ``eigvalsh``, ``svd(hermitian=True)``; docs/numerics.md).

Default ``gradient="symmetric"``: the gradient within Hermitian matrices (itself Hermitian),
equal to autograd's for cholesky and to JAX's for eigh (JAX symmetrises the input; autograd's
eigh gradient is the triangle one, so JAX's is its symmetric part). ``gradient="triangle"``: the
exact gradient of numpy's function (the old default), zero on the unread triangle. Both agree
along Hermitian directions, which is what central differences check here.
"""

import autograd
import autograd.numpy as anp
import numpy as np
import pytest

import functrace as ft
import functrace.numpy as fnp
from functrace.test_util import check_grads

LA = fnp.linalg
_r = np.random.default_rng(42)
_X = _r.standard_normal((4, 4))
SPD = _X @ _X.T + 4 * np.eye(4)
NONSYM = SPD + np.triu(_r.standard_normal((4, 4)), 1)   # numpy reads the lower triangle
W = _r.standard_normal((4, 4))
WV = _r.standard_normal(4)


def _sym(g):
    return (g + g.T) / 2


def _chol_loss(m, **kw):
    return lambda a: m.sum(m.linalg.cholesky(a, **kw) * W)


def _eigh_loss(m, **kw):
    def f(a):
        w, v = m.linalg.eigh(a, **kw)
        return m.sum(v ** 2 * W) + m.sum(w * WV)
    return f


@pytest.mark.parametrize("a", [SPD, NONSYM], ids=["spd", "unread_triangle_differs"])
def test_cholesky_default_gradient_is_autograds(a):
    g = ft.grad(_chol_loss(fnp))(a)
    want = autograd.grad(_chol_loss(anp))(a)
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(g, g.T)
    tri = ft.grad(_chol_loss(fnp, gradient="triangle"))(a)
    np.testing.assert_array_equal(np.triu(tri, 1), 0)
    # the triangle gradient is the symmetric one folded onto the lower triangle
    np.testing.assert_allclose(_sym(tri), g, rtol=1e-12, atol=1e-14)


def test_cholesky_upper():
    g = ft.grad(lambda a: fnp.sum(LA.cholesky(a, upper=True) * W))(NONSYM.T)
    want = autograd.grad(lambda a: anp.sum(anp.linalg.cholesky(a.T).T * W))(NONSYM.T)
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-14)
    tri = ft.grad(lambda a: fnp.sum(LA.cholesky(a, upper=True, gradient="triangle") * W))(
        NONSYM.T)
    np.testing.assert_array_equal(np.tril(tri, -1), 0)


@pytest.mark.parametrize("a", [SPD, NONSYM], ids=["spd", "unread_triangle_differs"])
def test_eigh_default_gradient_is_jaxs(a):
    g = ft.grad(_eigh_loss(fnp))(a)
    ag = autograd.grad(_eigh_loss(anp))(a)           # autograd: the triangle gradient
    np.testing.assert_allclose(g, _sym(ag), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(g, g.T)
    tri = ft.grad(_eigh_loss(fnp, gradient="triangle"))(a)
    np.testing.assert_allclose(tri, ag, rtol=1e-10, atol=1e-12)
    # symmetrize_input=True (JAX's eigh) has the same gradient at a Hermitian input
    if a is SPD:
        gs = ft.grad(_eigh_loss(fnp, symmetrize_input=True))(a)
        np.testing.assert_allclose(gs, g, rtol=1e-10, atol=1e-12)


def test_eigvalsh_and_hermitian_svd_are_symmetric():
    g = ft.grad(lambda a: fnp.sum(LA.eigvalsh(a, "U") ** 3))(NONSYM.T)
    np.testing.assert_allclose(g, g.T, rtol=1e-12)
    tri = ft.grad(lambda a: fnp.sum(LA.eigvalsh(a, "U", gradient="triangle") ** 3))(NONSYM.T)
    np.testing.assert_array_equal(np.tril(tri, -1), 0)
    g = ft.grad(lambda a: fnp.sum(LA.svd(a, hermitian=True, compute_uv=False) * WV))(SPD - 5)
    np.testing.assert_allclose(g, g.T, rtol=1e-12)


def test_values_are_numpys_for_any_input():
    # the symmetric gradient does not change values: still the triangle numpy reads, bit for bit
    for f in (LA.cholesky, lambda a: LA.eigh(a)[0], lambda a: LA.eigh(a, "U")[1]):
        np.testing.assert_array_equal(ft.trace(f)(NONSYM)(NONSYM), f(NONSYM))


@pytest.mark.parametrize("which", ["cholesky", "eigh"])
def test_symmetric_gradient_vs_finite_differences_to_second_order(which):
    # a function of the free entries x of a symmetric matrix: both conventions are exact here
    def make(x):
        s = fnp.reshape(x, (4, 4))
        return s + fnp.swapaxes(s, 0, 1) + 8.0 * np.eye(4)

    loss = _chol_loss(fnp) if which == "cholesky" else _eigh_loss(fnp)
    check_grads(lambda x: loss(make(x)), (_X.ravel(),), order=2, modes=("fwd", "rev"))


def test_bad_option():
    with pytest.raises(ValueError, match="symmetric"):
        LA.cholesky(SPD, gradient="lower")
    with pytest.raises(ValueError, match="symmetric"):
        ft.grad(lambda a: fnp.sum(LA.eigh(a, gradient="lower")[0]))(SPD)
