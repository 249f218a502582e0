"""functrace.scipy.linalg beyond the OpCase table (which checks values, tracing, JSON and
gradients of every function): the derivatives of the matrix functions against scipy's own
(``expm_frechet``, a Sylvester solve), vmap and jit, errors, docstrings and doctests.
"""

import doctest

import numpy as np
import pytest
import scipy.linalg as sla

import functrace as ft
import functrace.numpy as fnp
import functrace.scipy.linalg as fsl

_r = np.random.default_rng(7)
A = _r.standard_normal((4, 4))
E = _r.standard_normal((4, 4))
P = A @ A.T / 4 + np.eye(4) + 0.3 * _r.standard_normal((4, 4))   # eigenvalues in Re > 0


def test_expm_derivative_is_scipys_frechet():
    for a in (A, 3.0 * A):                     # 3A: scaling and squaring takes several steps
        _, tangent = ft.jvp(fsl.expm, (a,), (E,))
        np.testing.assert_allclose(tangent, sla.expm_frechet(a, E, compute_expm=False),
                                   rtol=1e-10, atol=1e-10 * np.abs(tangent).max())
        # the vjp is the Fréchet derivative at a^T
        g = ft.grad(lambda x: fnp.sum(fsl.expm(x) * E))(a)
        np.testing.assert_allclose(g, sla.expm_frechet(a.T, E, compute_expm=False),
                                   rtol=1e-10, atol=1e-10 * np.abs(g).max())


def test_sqrtm_derivative_solves_the_sylvester_equation():
    x = sla.sqrtm(P)
    _, tangent = ft.jvp(fsl.sqrtm, (P,), (E,))
    np.testing.assert_allclose(tangent, sla.solve_sylvester(x, x, E), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(x @ tangent + tangent @ x, E, atol=1e-9)


def test_sqrtm_complex_input_and_real_error():
    c = P + 0.2j * E
    np.testing.assert_allclose(ft.trace(fsl.sqrtm)(c)(c), sla.sqrtm(c), rtol=1e-12)
    neg = -np.eye(2)
    with pytest.raises(ValueError, match="complex"):
        ft.trace(fsl.sqrtm)(neg)(neg)


def test_vmap_and_jit():
    stack = np.stack([A / 2, E / 2, P])
    np.testing.assert_allclose(ft.vmap(fsl.expm)(stack), sla.expm(stack), rtol=1e-12)
    b = np.ones(4)

    def f(a):
        lu_piv = fsl.lu_factor(a)
        return fsl.lu_solve(lu_piv, b) + fsl.solve_triangular(a, b, lower=True)

    want = np.stack([f(m) for m in stack])
    np.testing.assert_allclose(ft.vmap(f)(stack), want, rtol=1e-10)
    np.testing.assert_allclose(ft.jit(f)(P), f(P), rtol=1e-12)
    g = ft.jit(ft.grad(lambda a: fnp.sum(fsl.expm(a) + fsl.sqrtm(a))))(P)
    np.testing.assert_allclose(g, ft.grad(lambda a: fnp.sum(fsl.expm(a) + fsl.sqrtm(a)))(P),
                               rtol=1e-10)


def test_lu_reconstructs_and_solves():
    for shape in ((4, 4), (5, 3), (3, 5)):
        a = _r.standard_normal(shape)
        p, l_, u = ft.trace(fsl.lu)(a)(a)
        np.testing.assert_allclose(p @ l_ @ u, a, atol=1e-12)
    lu_piv = sla.lu_factor(A)       # eager factors (numpy arrays) feed a traced solve
    x = ft.trace(lambda b: fsl.lu_solve(lu_piv, b, trans=2))(E)(E)
    np.testing.assert_allclose(A.T @ x, E, atol=1e-10)


def test_cho_factor_keeps_the_other_triangle():
    for lower in (False, True):
        s = A @ A.T + 4 * np.eye(4)
        s[(0, 3) if lower else (3, 0)] = 99.0   # unread: scipy leaves it in c, so do we
        c, low = ft.trace(lambda a, lower=lower: fsl.cho_factor(a, lower=lower))(s)(s)
        want = sla.cho_factor(s, lower=lower)
        np.testing.assert_array_equal(c, want[0])


def test_traced_limits_are_clear_errors():
    with pytest.raises(NotImplementedError, match="economic"):
        ft.trace(lambda a: fsl.qr(a))(np.ones((4, 3)))
    with pytest.raises(NotImplementedError, match="generalized"):
        ft.trace(lambda a: fsl.eigh(a, np.eye(3)))(np.eye(3))
    with pytest.raises(ValueError, match="trans"):
        ft.trace(lambda a: fsl.solve_triangular(a, np.ones(3), trans=3))(np.eye(3))
    with pytest.raises(NotImplementedError, match="assume_a"):
        ft.trace(lambda a: fsl.inv(a, assume_a="banded"))(np.eye(3))


def test_every_public_function_has_an_example_and_doctests_pass():
    missing = [n for n in fsl.__all__ if ">>>" not in (getattr(fsl, n).__doc__ or "")]
    assert not missing, missing
    res = doctest.testmod(fsl, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.failed == 0 and res.attempted > 0
