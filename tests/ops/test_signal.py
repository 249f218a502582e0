"""functrace.scipy.signal beyond the OpCase rows: autograd's ``axes``/``dot_axes`` extension of
``convolve`` (the layer of autograd's examples/convnet.py) against autograd's own function,
and its argument errors. Values, traced == eager and gradients to order 2 are rows of
``tests/support/op_cases.py`` (``scipy.signal.convolve:axes_*``)."""

from __future__ import annotations

import numpy as np
import pytest

import functrace as ft
import functrace.scipy.signal as fsig

CONFIGS = [   # (in1 shape, in2 shape, axes, dot_axes)
    ((4, 2, 9, 8), (2, 3, 3, 4), ([2, 3], [2, 3]), ([1], [0])),    # images x filters
    ((2, 3, 3, 4), (4, 2, 9, 8), ([2, 3], [2, 3]), ([0], [1])),    # the smaller one first
    ((5, 7), (3, 2), ([0], [1]), ([], [])),                       # kept axes only
    ((2, 6, 3), (3, 4), ([1], [1]), ([2], [0])),
]


@pytest.mark.parametrize("mode", ["valid", "full", "same"])
@pytest.mark.parametrize("s1, s2, axes, dot_axes", CONFIGS)
def test_convolve_axes_equals_autograds(s1, s2, axes, dot_axes, mode):
    ag = pytest.importorskip("autograd")
    ags = pytest.importorskip("autograd.scipy.signal")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(s1), rng.standard_normal(s2)
    want = ags.convolve(a, b, axes=axes, dot_axes=dot_axes, mode=mode)
    got = fsig.convolve(a, b, axes=axes, dot_axes=dot_axes, mode=mode)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    ct = rng.standard_normal(want.shape)

    def loss(m, conv):
        return lambda a, b: m.sum(ct * conv(a, b, axes=axes, dot_axes=dot_axes, mode=mode))

    import autograd.numpy as anp

    import functrace.numpy as fnp
    want_g = ag.grad(loss(anp, ags.convolve), argnum=(0, 1))(a, b)
    got_g = ft.jit(ft.grad(loss(fnp, fsig.convolve), argnums=(0, 1)), backend="numpy")(a, b)
    for g, w in zip(got_g, want_g, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_convolve_axes_argument_errors():
    a, b = np.ones((2, 3, 5)), np.ones((3, 4, 2))
    with pytest.raises(ValueError, match=r"dot_axes pair axis 1 of in1 \(size 3\) with axis 0"):
        fsig.convolve(a, np.ones((4, 4, 2)), axes=([2], [2]), dot_axes=([1], [0]))
    with pytest.raises(ValueError, match="pairs 2 axes of in1 with 1 of in2"):
        fsig.convolve(a, b, axes=([1, 2], [2]))
    with pytest.raises(ValueError, match="in both axes and dot_axes"):
        fsig.convolve(a, b, axes=([1], [0]), dot_axes=([1], [0]))
    with pytest.raises(ValueError, match="must be a pair"):
        fsig.convolve(a, b, axes=[2])
    with pytest.raises(ValueError, match="out of range"):
        fsig.convolve(a, b, axes=([3], [2]))
    with pytest.raises(ValueError, match="at least as large"):
        fsig.convolve(np.ones((3, 2)), np.ones((2, 3)), axes=([0, 1], [0, 1]), mode="valid")
    with pytest.raises(NotImplementedError, match="method='direct'"):
        fsig.convolve(a, b, axes=([2], [2]), dot_axes=([1], [0]), method="fft")


def test_convolve_without_axes_is_still_scipys():
    import scipy.signal
    a, b = np.arange(6.0), np.array([1.0, -2.0, 0.5])
    np.testing.assert_array_equal(fsig.convolve(a, b), scipy.signal.convolve(a, b))
    # dot_axes alone: every other axis is convolved, in order
    x = np.arange(12.0).reshape(3, 4)
    got = fsig.convolve(x, np.ones((4, 2)), dot_axes=([1], [0]))
    np.testing.assert_allclose(got, scipy.signal.convolve(x.sum(axis=1), np.ones(2)))
