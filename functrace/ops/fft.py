"""The discrete Fourier transform primitive ``fft`` (jax.lax.fft's op), with its rules.

Owns ``fft_p`` and its op-level function ``fft(x, fft_type, fft_lengths, axes)``. Imports
core/tracing and the sibling families ``elementwise`` and ``shape`` only; never
``functrace.numpy`` (``functrace.numpy.fft`` builds numpy's functions, ``n``/``s`` padding,
``norm`` scaling and dtype rules, on this op).

One op, four kinds (the ``fft_type`` param), each a linear map over the operand's ``axes``
(``fft_lengths`` are the lengths of the *real-space* side along those axes, in order):

* ``"fft"``:  complex -> complex, ``numpy.fft.fftn`` (unnormalised).
* ``"ifft"``: complex -> complex, ``numpy.fft.ifftn`` (scaled by 1/N, N = prod(fft_lengths)).
* ``"rfft"``: real -> complex, ``numpy.fft.rfftn``: the last axis of ``axes`` keeps
  ``n // 2 + 1`` bins (n = fft_lengths[-1]).
* ``"irfft"``: complex -> real, ``numpy.fft.irfftn(s=fft_lengths)``: the operand's last axis
  of ``axes`` holds ``n // 2 + 1`` bins; the imaginary parts of the DC bin (and of the
  Nyquist bin when n is even) are not read.

The impl calls the array module's fft (``numpy.fft``, or ``cupy.fft`` for device arrays), so
values are numpy's (numpy 2 computes float32/complex64 in single precision).

Rules. Cotangents pair with tangents as ``Re(sum(ct * dy))`` with no conjugation (the package
convention, JAX's), so the vjp of a map is its plain transpose (with a real part taken where
the map's input is real). Derivations, with F the unnormalised DFT matrix over ``axes``
(symmetric: ``F^T = F``; likewise the inverse), P the truncation of the last axis to its
m = n//2 + 1 first bins and N = prod(fft_lengths):

* fft, ifft: symmetric matrices, so ``vjp(ct) = fft(ct)`` / ``ifft(ct)`` (same type).
* rfft = P F on real input: ``vjp(ct) = Re(F P^T ct)`` (zero-pad ct back to n bins, full FFT,
  real part). Written without the full complex FFT: ``Re(F v)`` for v supported on the first
  m bins equals ``N * irfft(d * conj(v))`` with d = 1 at the DC bin (and at the Nyquist bin
  for even n) and 1/2 elsewhere, because irfft sums each interior bin twice (as z and
  conj(z)) and the DC/Nyquist bins once (real part only).
* irfft: ``y_j = (1/N) sum_k c_k Re(z_k e^{+2 pi i k j/n})`` with c = 1 at DC/Nyquist and 2 on
  interior bins, so ``vjp(ct) = (c / N) * conj(rfft(ct))``; DC/Nyquist cotangents are real,
  so the unread imaginary parts get a zero gradient.
* jvp: the op applied to the tangent (linear).
* batching: the ``axes`` family (the batch axis goes in front, ``axes`` shift by one).

The rules are written with this op, ``conj``, ``mul``, ``pad`` and ``broadcast_in_dim``: every
rule is differentiable again (tested to second order against finite differences,
``tests/ops/test_fft.py``, which also checks each rule against the dense matrix of the map).
"""

from __future__ import annotations

import math

import numpy as np

from ..core import AVal, Op
from ..errors import ShapeError
from ..tracing import bind
from ._base import dtype_of, namespace_of, shape_of
from .elementwise import conj, mul
from .shape import broadcast_in_dim, pad

__all__ = ["FFT_TYPES", "fft", "fft_p"]

FFT_TYPES = ("fft", "ifft", "rfft", "irfft")
_REAL = {np.dtype("float32"): np.dtype("complex64"), np.dtype("float64"): np.dtype("complex128")}
_COMPLEX = {c: r for r, c in _REAL.items()}


def _fft_abstract(x: AVal, *, fft_type, fft_lengths, axes):
    if fft_type not in FFT_TYPES:
        raise ValueError(f"fft: fft_type must be one of {FFT_TYPES}, got {fft_type!r}")
    if len(axes) != len(fft_lengths) or not axes:
        raise ShapeError(f"fft: axes {axes} and fft_lengths {fft_lengths} need one length per "
                         "axis (at least one)")
    if len(set(axes)) != len(axes) or not all(0 <= a < x.ndim for a in axes):
        raise ShapeError(f"fft: axes {axes} must be distinct non-negative axes of an operand "
                         f"of shape {x.shape}")
    if any(n < 1 for n in fft_lengths):
        raise ShapeError(f"fft: invalid number of FFT data points {fft_lengths}")
    real_in = fft_type == "rfft"
    table = _REAL if real_in else _COMPLEX
    if x.dtype not in table:
        want = "float32 or float64" if real_in else "complex64 or complex128"
        raise TypeError(f"fft ({fft_type}) takes {want} operands, got {x.dtype} "
                        "(functrace.numpy.fft converts)")
    want_shape = list(x.shape)
    for a, n in zip(axes, fft_lengths):
        want_shape[a] = n
    if fft_type == "irfft":
        want_shape[axes[-1]] = fft_lengths[-1] // 2 + 1
    if tuple(want_shape) != x.shape:
        raise ShapeError(f"fft ({fft_type}): operand shape {x.shape} does not match "
                         f"fft_lengths {fft_lengths} over axes {axes} (expected "
                         f"{tuple(want_shape)})")
    out = list(x.shape)
    if fft_type == "rfft":
        out[axes[-1]] = fft_lengths[-1] // 2 + 1
    elif fft_type == "irfft":
        out[axes[-1]] = fft_lengths[-1]
    dtype = table[x.dtype] if fft_type in ("rfft", "irfft") else x.dtype
    return AVal(tuple(out), dtype)


def _fft_impl(x, *, fft_type, fft_lengths, axes):
    xp = namespace_of(x).fft
    if fft_type == "fft":
        return xp.fftn(x, axes=axes)
    if fft_type == "ifft":
        return xp.ifftn(x, axes=axes)
    if fft_type == "rfft":
        return xp.rfftn(x, axes=axes)
    return xp.irfftn(x, s=fft_lengths, axes=axes)


fft_p = Op("fft", _fft_abstract, _fft_impl, linear=True,
           batch_family="axes", batch_axes="axes", fresh=True)


def fft(x, fft_type: str, fft_lengths, axes):
    """The DFT of kind ``fft_type`` ("fft", "ifft", "rfft", "irfft") over ``axes``.

    ``fft_lengths`` are the real-space lengths along ``axes`` (for "irfft", the output
    lengths; the operand's last axis of ``axes`` then holds ``n // 2 + 1`` bins). No padding,
    no truncation, numpy's default ("backward") normalisation.
    """
    nd = len(shape_of(x))
    axes = tuple(int(a) % nd if nd else int(a) for a in axes)
    return bind(fft_p, x, fft_type=str(fft_type), fft_lengths=tuple(int(n) for n in fft_lengths),
                axes=axes)


def _bin_weights(like, shape, axis, n, edge, inner):
    """A real-valued weight over the m = n//2 + 1 half-spectrum bins of ``axis``: ``edge`` at
    the DC bin (and the Nyquist bin for even n), ``inner`` elsewhere, broadcast to ``shape``,
    in ``like``'s (complex) dtype. Built with pad, not as an m-element literal."""
    dt = dtype_of(like)
    m = n // 2 + 1
    nyq = 1 if n % 2 == 0 and m > 1 else 0
    k = m - 1 - nyq
    w = broadcast_in_dim(np.asarray(inner, dt), (k,), ())
    w = pad(w, np.asarray(edge, dt), ((1, nyq, 0),))
    return broadcast_in_dim(w, tuple(shape), (axis,))


def _fft_vjp(cts, ins, outs, *, fft_type, fft_lengths, axes):
    ct = cts[0]
    if ct is None:
        return (None,)
    if fft_type in ("fft", "ifft"):
        return (fft(ct, fft_type, fft_lengths, axes),)
    big_n = math.prod(fft_lengths)
    n = fft_lengths[-1]
    if fft_type == "rfft":
        d = _bin_weights(ct, shape_of(ct), axes[-1], n, float(big_n), 0.5 * big_n)
        return (fft(mul(conj(ct), d), "irfft", fft_lengths, axes),)
    y = fft(ct, "rfft", fft_lengths, axes)
    c = _bin_weights(y, shape_of(y), axes[-1], n, 1.0 / big_n, 2.0 / big_n)
    return (mul(conj(y), c),)


def _fft_jvp(primals, tangents, outs, *, fft_type, fft_lengths, axes):
    t = tangents[0]
    return (None if t is None else fft(t, fft_type, fft_lengths, axes),)


fft_p.vjp, fft_p.jvp = _fft_vjp, _fft_jvp
