"""The ``fft`` primitive's rules (functrace/ops/fft.py) checked against the maps themselves.

Each kind (fft, ifft, rfft, irfft) is a real-linear map; its vjp rule must be its transpose
under the package pairing ``<ct, dy> = Re(sum(ct * dy))``. The dense matrix of each map is
built column by column from the impl (numpy's fft), for real and imaginary unit inputs, so the
rule is checked against numpy's map itself, with even and odd lengths (the DC/Nyquist
weighting), lengths 1 and 2, and several axes in any order. The OpCase rows
(tests/support/op_cases.py, ``fft.*``) check every ``fnp.fft`` function against numpy and its
gradients to second order against finite differences; here also the vjp of the vjp (the
transpose of the transpose is the map).
"""

from __future__ import annotations

import numpy as np
import pytest

import functrace as ft
import functrace.numpy as fnp
from functrace import ops

# (fft_type, fft_lengths, axes, operand shape)
MAPS = [
    ("fft", (5,), (0,), (5,)),
    ("ifft", (4,), (1,), (2, 4)),
    ("fft", (3, 4), (2, 0), (4, 2, 3)),
    ("ifft", (2, 3), (0, 1), (2, 3)),
    ("rfft", (1,), (0,), (1,)),
    ("rfft", (2,), (0,), (2,)),
    ("rfft", (6,), (0,), (6,)),
    ("rfft", (7,), (1,), (2, 7)),
    ("rfft", (3, 4), (1, 0), (4, 3)),
    ("irfft", (1,), (0,), (1,)),
    ("irfft", (2,), (0,), (2,)),
    ("irfft", (6,), (0,), (4,)),
    ("irfft", (7,), (1,), (2, 4)),
    ("irfft", (4, 5), (1, 0), (3, 4)),
]


def _impl(x, t, lengths, axes):
    return ops.fft_p.impl(x, fft_type=t, fft_lengths=lengths, axes=axes)


def _real_matrix(t, lengths, axes, shape):
    """The map as a real matrix acting on [Re x; Im x] (just x for real inputs), giving
    [Re y; Im y] (just y for real outputs)."""
    complex_in = t != "rfft"
    size = int(np.prod(shape))
    cols = []
    for part in ((1.0, 1j) if complex_in else (1.0,)):
        for i in range(size):
            e = np.zeros(size, complex if complex_in else float)
            e[i] = part
            y = _impl(e.reshape(shape), t, lengths, axes).ravel()
            cols.append(np.concatenate([y.real, y.imag]) if y.dtype.kind == "c" else y)
    return np.stack(cols, axis=1)


def _split(z, is_complex):
    z = np.asarray(z).ravel()
    return np.concatenate([z.real, z.imag]) if is_complex else z


@pytest.mark.parametrize("t, lengths, axes, shape", MAPS,
                         ids=[f"{m[0]}-{m[1]}-{m[2]}" for m in MAPS])
def test_vjp_is_the_transpose_of_numpys_map(t, lengths, axes, shape):
    rng = np.random.default_rng(0)
    complex_in = t != "rfft"
    x = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if complex_in else 0)
    y, pull = ft.vjp(lambda x: ops.fft(x, t, lengths, axes), x)
    np.testing.assert_allclose(y, _impl(x, t, lengths, axes), rtol=1e-13, atol=1e-13)
    ct = rng.standard_normal(y.shape) + (1j * rng.standard_normal(y.shape)
                                         if y.dtype.kind == "c" else 0)
    (g,) = pull(ct)
    assert g.dtype == x.dtype and g.shape == x.shape
    # Re(sum(ct * y)) = [Re ct; -Im ct] . [Re y; Im y], so the gradient [Re g; -Im g] = M^T c
    m = _real_matrix(t, lengths, axes, shape)
    c = _split(ct, False).real if y.dtype.kind != "c" else np.concatenate(
        [ct.real.ravel(), -ct.imag.ravel()])
    want = m.T @ c
    got = np.concatenate([g.real.ravel(), -g.imag.ravel()]) if complex_in else g.ravel()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # the jvp is the map itself
    dx = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if complex_in else 0)
    _, ty = ft.jvp(lambda x: ops.fft(x, t, lengths, axes), (x,), (dx,))
    np.testing.assert_allclose(ty, _impl(dx, t, lengths, axes), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("t, lengths, axes, shape", [m for m in MAPS if m[0] in ("rfft",
                                                                                   "irfft")])
def test_transpose_of_the_transpose_is_the_map(t, lengths, axes, shape):
    """The vjp rules are fft ops themselves: the vjp of the vjp (linear in the cotangent)
    gives back the forward map."""
    rng = np.random.default_rng(1)
    complex_in = t != "rfft"
    x = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if complex_in else 0)
    y = _impl(x, t, lengths, axes)

    def vjp_of(ct):
        return ft.vjp(lambda x: ops.fft(x, t, lengths, axes), x)[1](ct)[0]

    ct0 = np.zeros(y.shape, y.dtype)
    _, pull2 = ft.vjp(vjp_of, ct0)
    (back,) = pull2(x)
    # the transpose of (ct -> M^T ct) pairs back as M x, under the same pairing
    dct = rng.standard_normal(y.shape) + (1j * rng.standard_normal(y.shape)
                                          if y.dtype.kind == "c" else 0)
    lhs = np.real(np.sum(back * dct))
    rhs = np.real(np.sum(x * vjp_of(dct)))
    assert abs(lhs - rhs) <= 1e-10 * (1 + abs(lhs))
    np.testing.assert_allclose(np.real(np.sum(y * dct)), rhs, rtol=1e-10, atol=1e-10)


def test_real_loss_through_rfft_and_irfft_matches_finite_differences():
    """A power-spectrum loss and a spectral filter: real in, real out, complex inside."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal(33)
    h = rng.standard_normal(17)

    def loss(x, h):
        s = fnp.fft.rfft(x, norm="ortho")
        y = fnp.fft.irfft(s * h, 33)
        return fnp.sum(fnp.abs(s) ** 2 * h) + fnp.sum(y ** 3)

    from functrace.test_util import check_grads
    check_grads(loss, [x, h], order=2, modes=("rev", "fwd"))
    g = ft.grad(loss, argnums=(0, 1))(x.astype(np.float32), h.astype(np.float32))
    assert all(a.dtype == np.float32 for a in g)


def test_vmap_of_grad_and_jit_of_fft():
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((4, 10))

    def f(x):
        return fnp.sum(fnp.abs(fnp.fft.rfft(x, 12)) ** 2)

    g = ft.vmap(ft.grad(f))(xs)
    want = np.stack([ft.grad(f)(x) for x in xs])
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ft.jit(ft.vmap(ft.grad(f)))(xs), want, rtol=1e-12, atol=1e-12)
    # Parseval: sum |x|^2 = sum |fft x|^2 / n, gradient 2x
    x = xs[0]
    np.testing.assert_allclose(
        ft.grad(lambda x: fnp.sum(fnp.abs(fnp.fft.fft(x)) ** 2) / x.shape[0])(x), 2 * x,
        rtol=1e-12, atol=1e-12)


def test_numpy_fft_on_a_tracer_is_traced_and_errors_name_the_function():
    x = np.arange(8.0)
    g = ft.grad(lambda x: np.sum(np.fft.rfft(x).real))(x)   # numpy's own fft on a tracer
    np.testing.assert_allclose(g, ft.grad(lambda x: fnp.sum(fnp.fft.rfft(x).real))(x))
    with pytest.raises(TypeError, match="rfft"):
        ft.grad(lambda x: fnp.sum(fnp.fft.rfft(x + 1j).real))(x)
    with pytest.raises(ValueError, match="Invalid norm"):
        ft.grad(lambda x: fnp.sum(fnp.fft.fft(x, norm="bad").real))(x)
    with pytest.raises(ValueError, match="Invalid number of FFT data points"):
        ft.grad(lambda x: fnp.sum(fnp.fft.fft(x, 0).real))(x)


def test_docstring_examples():
    import doctest

    import functrace.numpy.fft as fnp_fft
    import functrace.scipy.signal as fsig
    for module in (fnp_fft, fsig):
        result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0 and result.attempted > 0, module.__name__
