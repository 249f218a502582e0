"""functrace.numpy.fft: numpy.fft, traceable and differentiable.

Every function has numpy's signature. Outside a transform it *is* numpy's (``np.fft.f`` is
called and its result returned unchanged). Inside one it follows numpy's dtype rules (numpy 2:
float32 and complex64 stay single precision, float16 computes in float32, integers and bools in
float64; ``rfft`` of complex input is a TypeError), pads or truncates to ``n`` / ``s`` with
``pad`` / ``slice`` ops, records the one primitive ``fft`` of ``functrace.ops.fft`` (jax.lax.fft's
op: FFT, IFFT, RFFT, IRFFT over several axes at once), and applies ``norm`` ("backward",
"ortho", "forward") as a multiplication. The op's rules make every function here
differentiable to any order; gradients of real functions of the complex spectra follow the
package convention (docs/numerics.md).

``fftshift``, ``ifftshift``, ``fftfreq`` and ``rfftfreq`` are built from slices, concatenation
and arithmetic (``fftfreq(n, d)`` is differentiable in a traced spacing ``d``).

Imports ``ops`` and ``numpy._core`` only.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from .. import ops
from ..tracing import Tracer, current_trace
from ._core import asarray_any, cast, normalize_axis

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
           "fftn", "ifftn", "rfftn", "irfftn", "fftshift", "ifftshift", "fftfreq", "rfftfreq"]

_NORMS = (None, "backward", "ortho", "forward")


def _traced() -> bool:
    return current_trace() is not None


def _np_call(fn, *args, out=None, **kw):
    return fn(*args, **kw) if out is None else fn(*args, out=out, **kw)


# --------------------------------------------------------------------------------------------
# dtypes, padding and normalisation
# --------------------------------------------------------------------------------------------

def _real_of(dt: np.dtype) -> np.dtype:
    """The real precision numpy.fft computes ``dt`` in: float32 for float16/float32/complex64,
    float64 for everything else it accepts (ints, bools, float64, complex128)."""
    if dt.kind not in "biufc":
        raise TypeError(f"numpy.fft cannot transform arrays of dtype {dt}")
    if dt in (np.dtype("float16"), np.dtype("float32"), np.dtype("complex64")):
        return np.dtype("float32")
    return np.dtype("float64")


def _complex_in(x):
    x = asarray_any(x)
    return cast(x, np.result_type(_real_of(x.dtype), np.complex64))


def _real_in(x, name):
    x = asarray_any(x)
    if x.dtype.kind == "c":
        raise TypeError(f"{name}: ufunc '{name}' is not supported for complex input "
                        "(numpy.fft real transforms take real arrays)")
    return cast(x, _real_of(x.dtype))


def _real_out(y, x_dtype):
    """numpy's output dtype of a complex -> real transform: ``result_type(a.real.dtype, 1.0)``
    (float16 input gives float16)."""
    want = np.result_type(np.empty(0, x_dtype).real.dtype, 1.0)
    return y if y.dtype == want else ops.convert_element_type(y, want)


def _resize(x, axis, n):
    """Zero-pad or truncate ``x`` to length ``n`` along ``axis`` (numpy.fft's ``n``)."""
    m = x.shape[axis]
    if n == m:
        return x
    if n < m:
        start = [0] * x.ndim
        limit = list(x.shape)
        limit[axis] = n
        return ops.slice_op(x, start, limit)
    cfg = [(0, 0, 0)] * x.ndim
    cfg[axis] = (0, n - m, 0)
    return ops.pad(x, np.zeros((), x.dtype), cfg)


def _check_n(n, what="n"):
    n = operator.index(n)
    if n < 1:
        raise ValueError(f"Invalid number of FFT data points ({n}) specified.")
    return n


def _scale(y, norm, n_total, forward):
    """numpy.fft's normalisation on top of the op's "backward" convention (forward transforms
    unscaled, inverse ones scaled by 1/n)."""
    if norm not in _NORMS:
        raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or '
                         '"forward".')
    if norm is None or norm == "backward":
        return y
    if norm == "ortho":
        f = 1 / math.sqrt(n_total) if forward else math.sqrt(n_total)
    else:   # "forward"
        f = 1 / n_total if forward else float(n_total)
    return ops.mul(y, np.asarray(f, y.dtype))


def _swap_direction(norm):
    try:
        return {None: "forward", "backward": "forward", "ortho": "ortho",
                "forward": "backward"}[norm]
    except KeyError:
        raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or '
                         '"forward".') from None


# --------------------------------------------------------------------------------------------
# one-dimensional transforms
# --------------------------------------------------------------------------------------------

def _c2c(a, n, axis, norm, kind):
    x = _complex_in(a)
    ax = normalize_axis(axis, x.ndim)
    n = _check_n(x.shape[ax] if n is None else n)
    y = ops.fft(_resize(x, ax, n), kind, (n,), (ax,))
    return _scale(y, norm, n, kind == "fft")


def fft(a, n=None, axis=-1, norm=None, out=None):
    """numpy.fft.fft: the one-dimensional discrete Fourier transform.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.fft.fft(np.array([1.0, 0.0, 0.0, 0.0]))
        array([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j])
    """
    if not _traced():
        return _np_call(np.fft.fft, a, n, axis, norm, out=out)
    return _c2c(a, n, axis, norm, "fft")


def ifft(a, n=None, axis=-1, norm=None, out=None):
    """numpy.fft.ifft: the one-dimensional inverse discrete Fourier transform.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.fft.ifft(np.array([4.0, 0.0, 0.0, 0.0]))
        array([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j])
    """
    if not _traced():
        return _np_call(np.fft.ifft, a, n, axis, norm, out=out)
    return _c2c(a, n, axis, norm, "ifft")


def rfft(a, n=None, axis=-1, norm=None, out=None):
    """numpy.fft.rfft: the DFT of real input, bins ``0 .. n//2``.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.fft.rfft(np.array([1.0, 2.0, 3.0, 4.0]))
        array([10.+0.j, -2.+2.j, -2.+0.j])
    """
    if not _traced():
        return _np_call(np.fft.rfft, a, n, axis, norm, out=out)
    x = _real_in(a, "rfft")
    ax = normalize_axis(axis, x.ndim)
    n = _check_n(x.shape[ax] if n is None else n)
    y = ops.fft(_resize(x, ax, n), "rfft", (n,), (ax,))
    return _scale(y, norm, n, True)


def irfft(a, n=None, axis=-1, norm=None, out=None):
    """numpy.fft.irfft: the inverse of ``rfft``; ``n`` output points (default
    ``2 * (m - 1)`` for ``m`` input bins). The imaginary parts of the DC bin (and of the
    Nyquist bin when ``n`` is even) are ignored, as numpy does; their gradient is zero.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.fft.irfft(np.array([10.0, -2 + 2j, -2.0]))
        array([1., 2., 3., 4.])
    """
    if not _traced():
        return _np_call(np.fft.irfft, a, n, axis, norm, out=out)
    x = asarray_any(a)
    dt = x.dtype
    x = _complex_in(x)
    ax = normalize_axis(axis, x.ndim)
    n = _check_n(2 * (x.shape[ax] - 1) if n is None else n)
    y = ops.fft(_resize(x, ax, n // 2 + 1), "irfft", (n,), (ax,))
    return _real_out(_scale(y, norm, n, False), dt)


def hfft(a, n=None, axis=-1, norm=None, out=None):
    """numpy.fft.hfft: the FFT of a signal with Hermitian symmetry (given by its first half),
    a real spectrum: ``irfft(conj(a), n) * n`` for the default norm.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.fft.hfft(np.array([1.0, 2.0, 3.0]))
        array([ 8., -2.,  0., -2.])
    """
    if not _traced():
        return _np_call(np.fft.hfft, a, n, axis, norm, out=out)
    x = asarray_any(a)
    if n is None:
        n = (x.shape[normalize_axis(axis, x.ndim)] - 1) * 2
    xc = _complex_in(x)
    return _real_out(irfft(ops.conj(xc), n, axis, _swap_direction(norm)), x.dtype)


def ihfft(a, n=None, axis=-1, norm=None, out=None):
    """numpy.fft.ihfft: the inverse of ``hfft``: ``conj(rfft(a, n)) / n`` for the default norm.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.fft.ihfft(np.array([8.0, -2.0, 0.0, -2.0]))
        array([1.-0.j, 2.-0.j, 3.-0.j])
    """
    if not _traced():
        return _np_call(np.fft.ihfft, a, n, axis, norm, out=out)
    return ops.conj(rfft(a, n, axis, _swap_direction(norm)))


# --------------------------------------------------------------------------------------------
# n-dimensional transforms
# --------------------------------------------------------------------------------------------

def _cook_nd_args(x, s, axes, invreal=False):
    """numpy.fft's ``_cook_nd_args``: the lengths ``s`` and normalised ``axes``."""
    shapeless = s is None
    if s is None:
        s = list(x.shape) if axes is None else [x.shape[normalize_axis(a, x.ndim)]
                                                for a in axes]
    s = list(s)
    if axes is None:
        axes = list(range(-len(s), 0))
    axes = [normalize_axis(a, x.ndim) for a in axes]
    if len(s) != len(axes):
        raise ValueError("Shape and axes have different lengths.")
    s = [x.shape[a] if v is None or v == -1 else v for v, a in zip(s, axes)]
    if invreal and shapeless:
        s[-1] = (x.shape[axes[-1]] - 1) * 2
    return [_check_n(v) for v in s], axes


def _c2c_nd(a, s, axes, norm, kind):
    x = _complex_in(a)
    s, axes = _cook_nd_args(x, s, axes)
    if len(set(axes)) != len(axes):      # repeated axes: numpy transforms once per entry
        for ax, n in reversed(list(zip(axes, s))):
            x = _c2c(x, n, ax, norm, kind)
        return x
    for ax, n in zip(axes, s):
        x = _resize(x, ax, n)
    y = ops.fft(x, kind, s, axes)
    return _scale(y, norm, math.prod(s), kind == "fft")


def fftn(a, s=None, axes=None, norm=None, out=None):
    """numpy.fft.fftn: the n-dimensional DFT over ``axes`` (all by default).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.fft.fftn(np.ones((2, 2)))
        array([[4.+0.j, 0.+0.j],
               [0.+0.j, 0.+0.j]])
    """
    if not _traced():
        return _np_call(np.fft.fftn, a, s, axes, norm, out=out)
    return _c2c_nd(a, s, axes, norm, "fft")


def ifftn(a, s=None, axes=None, norm=None, out=None):
    """numpy.fft.ifftn: the n-dimensional inverse DFT over ``axes`` (all by default).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.fft.ifftn(np.array([[4.0, 0.0], [0.0, 0.0]]))
        array([[1.+0.j, 1.+0.j],
               [1.+0.j, 1.+0.j]])
    """
    if not _traced():
        return _np_call(np.fft.ifftn, a, s, axes, norm, out=out)
    return _c2c_nd(a, s, axes, norm, "ifft")


def fft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """numpy.fft.fft2: ``fftn`` over the last two axes.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.fft.fft2(np.ones((2, 2))).real
        array([[4., 0.],
               [0., 0.]])
    """
    if not _traced():
        return _np_call(np.fft.fft2, a, s, axes, norm, out=out)
    return _c2c_nd(a, s, axes, norm, "fft")


def ifft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """numpy.fft.ifft2: ``ifftn`` over the last two axes.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.fft.ifft2(np.array([[4.0, 0.0], [0.0, 0.0]])).real
        array([[1., 1.],
               [1., 1.]])
    """
    if not _traced():
        return _np_call(np.fft.ifft2, a, s, axes, norm, out=out)
    return _c2c_nd(a, s, axes, norm, "ifft")


def rfftn(a, s=None, axes=None, norm=None, out=None):
    """numpy.fft.rfftn: the n-dimensional DFT of real input; the last of ``axes`` keeps bins
    ``0 .. s[-1]//2``.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.fft.rfftn(np.ones((2, 4))).shape
        (2, 3)
    """
    if not _traced():
        return _np_call(np.fft.rfftn, a, s, axes, norm, out=out)
    x = _real_in(a, "rfftn")
    s, axes = _cook_nd_args(x, s, axes)
    if len(set(axes)) != len(axes):
        y = rfft(x, s[-1], axes[-1], norm)
        for ax, n in zip(axes[:-1], s[:-1]):
            y = _c2c(y, n, ax, norm, "fft")
        return y
    for ax, n in zip(axes, s):
        x = _resize(x, ax, n)
    return _scale(ops.fft(x, "rfft", s, axes), norm, math.prod(s), True)


def irfftn(a, s=None, axes=None, norm=None, out=None):
    """numpy.fft.irfftn: the inverse of ``rfftn`` (``s[-1]`` output points along the last of
    ``axes``; default ``2 * (m - 1)``).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.fft.irfftn(np.array([[8.0, 0.0, 0.0], [0.0, 0.0, 0.0]]))
        array([[1., 1., 1., 1.],
               [1., 1., 1., 1.]])
    """
    if not _traced():
        return _np_call(np.fft.irfftn, a, s, axes, norm, out=out)
    x = asarray_any(a)
    dt = x.dtype
    x = _complex_in(x)
    s, axes = _cook_nd_args(x, s, axes, invreal=True)
    if len(set(axes)) != len(axes):
        for ax, n in zip(axes[:-1], s[:-1]):
            x = _c2c(x, n, ax, norm, "ifft")
        return irfft(x, s[-1], axes[-1], norm)
    for ax, n in zip(axes[:-1], s[:-1]):
        x = _resize(x, ax, n)
    x = _resize(x, axes[-1], s[-1] // 2 + 1)
    y = _scale(ops.fft(x, "irfft", s, axes), norm, math.prod(s), False)
    return _real_out(y, dt)


def rfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """numpy.fft.rfft2: ``rfftn`` over the last two axes.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.fft.rfft2(np.ones((2, 4))).shape
        (2, 3)
    """
    if not _traced():
        return _np_call(np.fft.rfft2, a, s, axes, norm, out=out)
    return rfftn(a, s, axes, norm)


def irfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """numpy.fft.irfft2: ``irfftn`` over the last two axes.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.fft.irfft2(np.array([[8.0, 0.0, 0.0], [0.0, 0.0, 0.0]])).shape
        (2, 4)
    """
    if not _traced():
        return _np_call(np.fft.irfft2, a, s, axes, norm, out=out)
    return irfftn(a, s, axes, norm)


# --------------------------------------------------------------------------------------------
# helpers: shifts and frequencies
# --------------------------------------------------------------------------------------------

def _shift_axes(x, axes):
    if axes is None:
        return list(range(x.ndim))
    if isinstance(axes, int | np.integer):
        return [normalize_axis(axes, x.ndim)]
    return [normalize_axis(a, x.ndim) for a in axes]


def _roll(x, shift, axis):
    """``np.roll(x, shift, axis)`` with two slices and a concatenation."""
    n = x.shape[axis]
    if n == 0:
        return x
    k = shift % n
    if k == 0:
        return x
    start, limit = [0] * x.ndim, list(x.shape)
    limit[axis] = n - k
    head = ops.slice_op(x, start, limit)
    start2, limit2 = [0] * x.ndim, list(x.shape)
    start2[axis] = n - k
    tail = ops.slice_op(x, start2, limit2)
    return ops.concatenate([tail, head], axis)


def fftshift(x, axes=None):
    """numpy.fft.fftshift: move the zero-frequency bin to the centre (over ``axes``; all by
    default).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.fft.fftshift(np.array([0.0, 1.0, 2.0, -2.0, -1.0]))
        array([-2., -1.,  0.,  1.,  2.])
    """
    if not _traced():
        return np.fft.fftshift(x, axes)
    x = asarray_any(x)
    for ax in _shift_axes(x, axes):
        x = _roll(x, x.shape[ax] // 2, ax)
    return x


def ifftshift(x, axes=None):
    """numpy.fft.ifftshift: the inverse of ``fftshift``.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.fft.ifftshift(np.array([-2.0, -1.0, 0.0, 1.0, 2.0]))
        array([ 0.,  1.,  2., -2., -1.])
    """
    if not _traced():
        return np.fft.ifftshift(x, axes)
    x = asarray_any(x)
    for ax in _shift_axes(x, axes):
        x = _roll(x, -(x.shape[ax] // 2), ax)
    return x


def _freq_scale(results, n, d):
    from ._ufuncs import divide, multiply
    val = divide(1.0, multiply(n, d))
    return multiply(results, val)


def fftfreq(n, d=1.0, device=None):
    """numpy.fft.fftfreq: the sample frequencies of an ``n``-point DFT with spacing ``d``
    (``[0, 1, ..., n//2 - 1 (or (n-1)//2), -n//2, ..., -1] / (d * n)``); differentiable in a
    traced ``d``.

    Example:
        >>> import functrace.numpy as fnp
        >>> fnp.fft.fftfreq(4, d=0.5)
        array([ 0. ,  0.5, -1. , -0.5])
    """
    if not isinstance(d, Tracer):
        return np.fft.fftfreq(n, d) if device is None else np.fft.fftfreq(n, d, device=device)
    n = operator.index(n)
    k = np.concatenate([np.arange(0, (n - 1) // 2 + 1), np.arange(-(n // 2), 0)])
    return _freq_scale(k, n, d)


def rfftfreq(n, d=1.0, device=None):
    """numpy.fft.rfftfreq: the sample frequencies of ``rfft``'s ``n//2 + 1`` bins,
    ``[0, 1, ..., n//2] / (d * n)``; differentiable in a traced ``d``.

    Example:
        >>> import functrace.numpy as fnp
        >>> fnp.fft.rfftfreq(4, d=0.5)
        array([0. , 0.5, 1. ])
    """
    if not isinstance(d, Tracer):
        return np.fft.rfftfreq(n, d) if device is None else np.fft.rfftfreq(n, d, device=device)
    n = operator.index(n)
    return _freq_scale(np.arange(n // 2 + 1), n, d)


# error messages name fnp.fft.<f> (functrace.numpy._device), as numpy.fft's functions say
# they belong to numpy.fft
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
