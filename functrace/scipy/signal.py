"""functrace.scipy.signal: scipy.signal's convolutions, traceable and differentiable.

``convolve``, ``correlate`` (modes full/same/valid; method direct/fft/auto), ``convolve2d``,
``correlate2d`` (boundary fill/wrap/symm with ``fillvalue``) and ``fftconvolve`` (``axes``),
with scipy's signatures; ``convolve`` also takes autograd's ``axes``/``dot_axes`` (the
batched, multi-channel convolution of a conv net). Outside a transform each *is* scipy's
function (scipy is imported on first use), except ``convolve`` with ``axes``/``dot_axes``,
which scipy does not have. Inside one it is written with ``functrace.numpy``, so gradients
flow to both inputs, to any order:

* **direct**: the full convolution of ``a`` with a kernel ``k`` of shape K is
  ``out[i] = sum_u rev(k)[u] * P[i + u]`` with ``P`` the signal padded by ``K - 1`` on each
  side; only the output window the mode keeps is computed. The ``prod(K)`` shifted windows of
  ``P`` are stacked on a last axis and contracted with ``rev(k)`` in one ``dot`` (BLAS), so a
  call records O(prod(K)) small view ops and one product. The smaller operand is the kernel
  (convolution commutes; not for 2-D boundaries other than a zero fill).
* **fft**: ``irfftn(rfftn(a, s) * rfftn(b, s), s)`` over a 5-smooth length ``s >= n1 + n2 - 1``
  (complex inputs use ``fftn``/``ifftn``), then the mode's window (``functrace.numpy.fft``).
* **auto** (traced): direct when the smaller operand has at most 4 elements or both inputs are
  integer or bool arrays (exact integer results, as scipy), else fft: with gradients, fft is
  the faster of the two from about 9 kernel elements on (1e4 x 9 in 1-D, 64x64 * 3x3 in 2-D,
  measured). scipy's own choice (timings) may differ; values agree to rounding.
* **axes/dot_axes** (autograd's extension): always direct. The kept and summed axes ride
  along with the windows, and the one ``tensordot`` sums over the dot axes and the kernel's
  elements together (im2col), so a conv layer is one BLAS product.

dtypes are scipy's: ``result_type`` of the inputs for direct, float32 stays float32 through
fft. Imports ``functrace.numpy`` and ``functrace.tracing`` only.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .. import numpy as fnp
from ..tracing import Tracer, current_trace

__all__ = ["convolve", "correlate", "convolve2d", "correlate2d", "fftconvolve"]

_AUTO_DIRECT_MAX = 4


def _scipy_signal():
    import scipy.signal
    return scipy.signal


def _traced() -> bool:
    return current_trace() is not None


# --------------------------------------------------------------------------------------------
# shapes of the modes
# --------------------------------------------------------------------------------------------

def _swap_needed(mode, s1, s2, axes=None):
    """scipy's ``_inputs_swap_needed``: in 'valid' mode the larger operand goes first."""
    if mode != "valid":
        return False
    axes = range(len(s1)) if axes is None else axes
    ok1 = all(s1[i] >= s2[i] for i in axes)
    ok2 = all(s2[i] >= s1[i] for i in axes)
    if not (ok1 or ok2):
        raise ValueError("For 'valid' mode, one must be at least as large as the other in "
                         "every dimension")
    return not ok1


def _window(mode, n1, n2, same_start=None):
    """(start, length) along one axis of the full result that ``mode`` keeps."""
    if mode == "full":
        return 0, n1 + n2 - 1
    if mode == "same":
        return ((n2 - 1) // 2 if same_start is None else same_start), n1
    if mode == "valid":
        return min(n1, n2) - 1, abs(n1 - n2) + 1
    raise ValueError("acceptable mode flags are 'valid', 'same', or 'full'")


def _prep(in1, in2):
    a, b = fnp.asarray(in1), fnp.asarray(in2)
    if a.ndim != b.ndim:
        raise ValueError("in1 and in2 should have the same dimensionality")
    dt = np.result_type(a.dtype, b.dtype)
    return fnp.asarray(a, dtype=dt), fnp.asarray(b, dtype=dt)


def _is_exact(dt) -> bool:
    return np.dtype(dt).kind in "biu"


# --------------------------------------------------------------------------------------------
# the direct method
# --------------------------------------------------------------------------------------------

def _direct_conv(sig, ker, starts, lengths, pad_kw=None, n_dot=0):
    """``full(sig * ker)[start : start + length]`` per axis, as one contraction of the shifted
    windows of the padded signal with the reversed kernel. ``pad_kw``: how the signal is
    extended (``fnp.pad`` keywords; default zeros).

    The convolved axes are the last ``len(starts)`` axes of both operands; the ``n_dot`` axes
    before them are summed over (their sizes agree), and the leading axes of each operand are
    kept as an outer product: ``(sig's leading, conv, ker's leading)`` is the result's
    layout. With neither, this is scipy's n-dimensional convolution."""
    nc = len(starts)
    K = ker.shape[ker.ndim - nc:]
    pad = [(0, 0)] * (sig.ndim - nc) + [(k - 1, k - 1) for k in K]
    P = fnp.pad(sig, pad, **(pad_kw or {}))
    w = fnp.flip(ker, axis=tuple(range(ker.ndim - nc, ker.ndim))) if nc else ker
    lead = (slice(None),) * (sig.ndim - nc)
    windows = []
    for u in itertools.product(*[range(k) for k in K]):
        idx = tuple(slice(s + ui, s + ui + n) for s, ui, n in zip(starts, u, lengths))
        windows.append(P[lead + idx])
    stacked = fnp.stack(windows, axis=-1)
    w = fnp.reshape(w, ker.shape[:ker.ndim - nc] + (-1,))
    ns, nk = sig.ndim - nc - n_dot, ker.ndim - nc - n_dot
    return fnp.tensordot(stacked, w, axes=([*range(ns, ns + n_dot), stacked.ndim - 1],
                                           [*range(nk, nk + n_dot), w.ndim - 1]))


def _conv_direct(a, b, mode, same_start=None, pad_kw=None):
    wins = [_window(mode, n1, n2, s) for n1, n2, s in zip(
        a.shape, b.shape, same_start or [None] * a.ndim)]
    starts, lengths = [w[0] for w in wins], [w[1] for w in wins]
    if pad_kw is None and b.size > a.size:   # convolution commutes: the smaller is the kernel
        a, b = b, a
    return _direct_conv(a, b, starts, lengths, pad_kw)


# --------------------------------------------------------------------------------------------
# the fft method
# --------------------------------------------------------------------------------------------

def _next_fast_len(n: int) -> int:
    """The smallest 2^i 3^j 5^k >= n (pocketfft's fast lengths)."""
    best = 2 ** math.ceil(math.log2(max(n, 1)))
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            m = p35
            while m < n:
                m *= 2
            best = min(best, m)
            p35 *= 3
        p5 *= 5
    return best


def _fft_conv(a, b, mode, axes):
    s1, s2 = a.shape, b.shape
    if _swap_needed(mode, s1, s2, axes):
        a, b, s1, s2 = b, a, s2, s1
    full = [s1[i] + s2[i] - 1 for i in axes]
    fshape = [_next_fast_len(n) for n in full]
    if a.dtype.kind == "c" or b.dtype.kind == "c":
        sp = fnp.fft.fftn(a, fshape, axes=axes) * fnp.fft.fftn(b, fshape, axes=axes)
        ret = fnp.fft.ifftn(sp, fshape, axes=axes)
    else:
        sp = fnp.fft.rfftn(a, fshape, axes=axes) * fnp.fft.rfftn(b, fshape, axes=axes)
        ret = fnp.fft.irfftn(sp, fshape, axes=axes)
    idx = [slice(None)] * ret.ndim
    for i, ax in enumerate(axes):
        start, length = _window(mode, s1[ax], s2[ax])
        if mode == "same":
            start = (full[i] - s1[ax]) // 2
        idx[ax] = slice(start, start + length)
    return ret[tuple(idx)]


def fftconvolve(in1, in2, mode="full", axes=None):
    """scipy.signal.fftconvolve: convolution through the FFT over ``axes`` (all by default;
    the other axes broadcast).

    Example:
        >>> import functrace.scipy.signal as fsig, numpy as np
        >>> fsig.fftconvolve(np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 0.5])).round(12)
        array([1. , 3. , 5.5, 4. , 1.5])
    """
    if not _traced():
        return _scipy_signal().fftconvolve(in1, in2, mode, axes)
    a, b = fnp.asarray(in1), fnp.asarray(in2)
    if a.ndim != b.ndim:
        raise ValueError("in1 and in2 should have the same dimensionality")
    if a.ndim == 0:
        return a * b
    if a.size == 0 or b.size == 0:
        return fnp.zeros((0,) * a.ndim, np.result_type(a.dtype, b.dtype, np.float16))
    if axes is None:
        axes = list(range(a.ndim))
    elif isinstance(axes, int | np.integer):
        axes = [int(axes) % a.ndim]
    else:
        axes = sorted({int(ax) % a.ndim for ax in axes})
    for i in range(a.ndim):
        if i not in axes and a.shape[i] != b.shape[i] and 1 not in (a.shape[i], b.shape[i]):
            raise ValueError("incompatible shapes for in1 and in2: "
                             f"{a.shape} and {b.shape}")
    if _is_exact(a.dtype):
        a = fnp.asarray(a, dtype=np.float64)
    if _is_exact(b.dtype):
        b = fnp.asarray(b, dtype=np.float64)
    return _fft_conv(a, b, mode, axes)


# --------------------------------------------------------------------------------------------
# convolve, correlate
# --------------------------------------------------------------------------------------------

def _auto_method(a, b):
    """What ``method='auto'`` means when traced: direct for integer/bool inputs or when the
    smaller input has at most ``_AUTO_DIRECT_MAX`` elements, else fft."""
    if _is_exact(a.dtype) and _is_exact(b.dtype):
        return "direct"
    return "direct" if min(a.size, b.size) <= _AUTO_DIRECT_MAX else "fft"


def _method(method, a, b, mode):
    if method not in ("auto", "direct", "fft"):
        raise ValueError("acceptable method flags are 'auto', 'direct', or 'fft'")
    if method == "auto":
        method = _auto_method(a, b)
    if method == "fft" and _is_exact(np.result_type(a.dtype, b.dtype)):
        method = "direct"         # scipy rounds integer fft results: exact direct values
    return method


def convolve(in1, in2, mode="full", method="auto", *, axes=None, dot_axes=None):
    """scipy.signal.convolve: the n-dimensional convolution of two arrays of equal ndim.

    ``axes`` and ``dot_axes`` (keyword only) are autograd's extension of scipy's signature
    (``autograd.scipy.signal.convolve``), the layer of a convolutional net: ``axes=(axes_1,
    axes_2)`` pairs the axes that are convolved, ``dot_axes=(dot_1, dot_2)`` pairs axes that are
    summed over (as ``tensordot``), and every other axis of either input is kept as an outer
    product. The result's axes are in1's kept axes, then in2's, then the convolved ones::

        out[i, j, n] = sum_d convolve(in1[i, d, :], in2[j, d, :], mode)[n]

    Without ``axes``, every axis that is not a dot axis is convolved, in order. The inputs may
    then differ in ndim; they are computed directly (``method`` 'auto' or 'direct'), eagerly
    too (scipy has no such arguments).

    Example:
        >>> import functrace.scipy.signal as fsig, numpy as np
        >>> fsig.convolve(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]), mode="same")
        array([1. , 2.5, 4. ])
        >>> images, filters = np.ones((8, 3, 28, 28)), np.ones((3, 6, 5, 5))
        >>> fsig.convolve(images, filters, axes=([2, 3], [2, 3]), dot_axes=([1], [0]),
        ...               mode="valid").shape
        (8, 6, 24, 24)
    """
    if axes is not None or dot_axes is not None:
        return _conv_axes(in1, in2, mode, method, axes, dot_axes)
    if not _traced():
        return _scipy_signal().convolve(in1, in2, mode, method)
    a, b = _prep(in1, in2)
    if a.ndim == 0:
        return a * b
    if a.size == 0 or b.size == 0:
        return fnp.zeros((0,) * a.ndim, a.dtype)
    _swap_needed(mode, a.shape, b.shape)
    _window(mode, 1, 1)
    if _method(method, a, b, mode) == "fft":
        return _fft_conv(a, b, mode, list(range(a.ndim)))
    return _conv_direct(a, b, mode)


def _axis_list(axes, ndim, what):
    out = [int(ax) for ax in (axes if isinstance(axes, list | tuple) else [axes])]
    if any(not -ndim <= ax < ndim for ax in out):
        raise ValueError(f"convolve: {what} {axes} out of range for an array of ndim {ndim}")
    out = [ax % ndim for ax in out]
    if len(set(out)) != len(out):
        raise ValueError(f"convolve: repeated axis in {what} {axes}")
    return out


def _axis_pair(pair, ndims, what):
    if not isinstance(pair, list | tuple) or len(pair) != 2:
        raise ValueError(f"convolve: {what} must be a pair (axes of in1, axes of in2), got "
                         f"{pair!r}")
    first, second = (_axis_list(p, n, what) for p, n in zip(pair, ndims))
    if len(first) != len(second):
        raise ValueError(f"convolve: {what} pairs {len(first)} axes of in1 with "
                         f"{len(second)} of in2")
    return first, second


def _conv_axes(in1, in2, mode, method, axes, dot_axes):
    """autograd's ``convolve(A, B, axes, dot_axes, mode)``, by the direct method."""
    a, b = fnp.asarray(in1), fnp.asarray(in2)
    dt = np.result_type(a.dtype, b.dtype)
    a, b = fnp.asarray(a, dtype=dt), fnp.asarray(b, dtype=dt)
    da, db = _axis_pair(([], []) if dot_axes is None else dot_axes, (a.ndim, b.ndim),
                        "dot_axes")
    if axes is None:
        ca = [i for i in range(a.ndim) if i not in da]
        cb = [i for i in range(b.ndim) if i not in db]
        if len(ca) != len(cb):
            raise ValueError(f"convolve: without axes, in1 ({a.ndim}-d) and in2 ({b.ndim}-d) "
                             f"must have as many axes outside dot_axes")
    else:
        ca, cb = _axis_pair(axes, (a.ndim, b.ndim), "axes")
    if set(ca) & set(da) or set(cb) & set(db):
        raise ValueError("convolve: an axis is in both axes and dot_axes")
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise ValueError(f"convolve: dot_axes pair axis {i} of in1 (size {a.shape[i]}) "
                             f"with axis {j} of in2 (size {b.shape[j]})")
    if method not in ("auto", "direct", "fft"):
        raise ValueError("acceptable method flags are 'auto', 'direct', or 'fft'")
    if method == "fft":
        raise NotImplementedError("convolve(axes=..., dot_axes=...) is computed directly; "
                                  "use method='direct' or 'auto'")
    na, nb = [a.shape[i] for i in ca], [b.shape[j] for j in cb]
    swap = _swap_needed(mode, na, nb)
    wins = [_window(mode, n1, n2) for n1, n2 in zip(na, nb)]
    ka = [i for i in range(a.ndim) if i not in ca and i not in da]
    kb = [j for j in range(b.ndim) if j not in cb and j not in db]
    a = fnp.transpose(a, ka + da + ca)       # (kept, dot, convolved)
    b = fnp.transpose(b, kb + db + cb)
    # convolution commutes: the operand with fewer convolved elements is the kernel ('valid'
    # needs the smaller one there)
    b_is_kernel = not swap and (mode == "valid" or math.prod(nb) <= math.prod(na))
    sig, ker = (a, b) if b_is_kernel else (b, a)
    out = _direct_conv(sig, ker, [w[0] for w in wins], [w[1] for w in wins], n_dot=len(da))
    # out is (sig's kept, convolved, ker's kept): put in1's kept axes first
    n_sig = len(ka) if b_is_kernel else len(kb)
    n_ker = len(kb) if b_is_kernel else len(ka)
    conv = list(range(n_sig, n_sig + len(ca)))
    sig_kept = list(range(n_sig))
    ker_kept = list(range(n_sig + len(ca), n_sig + len(ca) + n_ker))
    order = sig_kept + ker_kept + conv if b_is_kernel else ker_kept + sig_kept + conv
    return fnp.transpose(out, order)


def _reverse_and_conj(x):
    x = fnp.flip(x) if x.ndim else x
    return fnp.conj(x) if x.dtype.kind == "c" else x


def correlate(in1, in2, mode="full", method="auto"):
    """scipy.signal.correlate: ``z[k] = sum_n in1[n + k] * conj(in2[n])`` (n-dimensional), as
    ``convolve(in1, reverse(conj(in2)))``.

    Example:
        >>> import functrace.scipy.signal as fsig, numpy as np
        >>> fsig.correlate(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]))
        array([0.5, 2. , 3.5, 3. , 0. ])
    """
    if not _traced():
        return _scipy_signal().correlate(in1, in2, mode, method)
    a, b = _prep(in1, in2)
    return convolve(a, _reverse_and_conj(b), mode, method)


# --------------------------------------------------------------------------------------------
# 2-D with boundaries
# --------------------------------------------------------------------------------------------

_BOUNDARIES = {"fill": "constant", "pad": "constant", "wrap": "wrap", "circular": "wrap",
               "symm": "symmetric", "symmetric": "symmetric"}


def _conv2d(a, b, mode, boundary, fillvalue, same_start=None):
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError("convolve2d inputs must both be 2-D arrays")
    try:
        pad_mode = _BOUNDARIES[boundary]
    except KeyError:
        raise ValueError("Acceptable boundary flags are 'fill' (or 'pad'), 'circular' (or "
                         "'wrap'), and 'symmetric' (or 'symm').") from None
    _window(mode, 1, 1)
    if _swap_needed(mode, a.shape, b.shape):
        a, b = b, a
    if pad_mode == "constant":
        if np.ndim(fillvalue) != 0:
            raise ValueError("fillvalue must be scalar or an array with one element.")
        fill_zero = not isinstance(fillvalue, Tracer) and fillvalue == 0
        pad_kw = None if fill_zero or mode == "valid" else {
            "mode": "constant", "constant_values": fillvalue}
    else:
        pad_kw = None if mode == "valid" else {"mode": pad_mode}
    if a.size == 0 or b.size == 0:
        return fnp.zeros((0, 0), a.dtype)
    if pad_kw is None:
        return _conv_direct(a, b, mode, same_start)
    wins = [_window(mode, n1, n2, s) for n1, n2, s in zip(
        a.shape, b.shape, same_start or [None, None])]
    return _direct_conv(a, b, [w[0] for w in wins], [w[1] for w in wins], pad_kw)


def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0):
    """scipy.signal.convolve2d: 2-D convolution with a boundary rule ('fill' with
    ``fillvalue``, 'wrap', 'symm').

    Example:
        >>> import functrace.scipy.signal as fsig, numpy as np
        >>> fsig.convolve2d(np.eye(2), np.ones((2, 2)))
        array([[1., 1., 0.],
               [1., 2., 1.],
               [0., 1., 1.]])
    """
    if not _traced():
        return _scipy_signal().convolve2d(in1, in2, mode, boundary, fillvalue)
    a, b = _prep(in1, in2)
    return _conv2d(a, b, mode, boundary, fillvalue)


def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0):
    """scipy.signal.correlate2d: 2-D cross-correlation with a boundary rule. Its 'same' window
    starts at ``in2.shape // 2`` (scipy's; ``correlate``'s starts at ``(in2.shape - 1) // 2``).

    Example:
        >>> import functrace.scipy.signal as fsig, numpy as np
        >>> fsig.correlate2d(np.eye(2), np.array([[1.0, 2.0], [3.0, 4.0]]))
        array([[4., 3., 0.],
               [2., 5., 3.],
               [0., 2., 1.]])
    """
    if not _traced():
        return _scipy_signal().correlate2d(in1, in2, mode, boundary, fillvalue)
    a, b = _prep(in1, in2)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError("correlate2d inputs must both be 2-D arrays")
    swapped = _swap_needed(mode, a.shape, b.shape)
    same = [n // 2 for n in b.shape] if mode == "same" else None
    out = _conv2d(a, _reverse_and_conj(b), mode, boundary, fillvalue, same)
    if swapped and out.dtype.kind == "c":
        out = fnp.conj(out)      # scipy reverses the swapped correlation: its conjugate
    return out
