"""functrace.numpy.linalg: numpy.linalg, traceable and differentiable.

Every function has numpy's signature. Outside a transform it *is* numpy's (``np.linalg.f`` is
called and its result returned unchanged). Inside one it promotes like numpy.linalg (bool and
integers become float64, float16 and longdouble are rejected, mixed operands share one type),
broadcasts batch axes explicitly, and records the primitives of ``functrace.ops.linalg``
(cholesky, triangular_solve, solve, inv, det, slogdet, eigh, svd, qr), whose rules make every
function here differentiable to any order. Results that numpy returns as named tuples
(``SlogdetResult``, ``EighResult``, ``SVDResult``, ``QRResult``) are the same classes when
traced, holding tracers.

Choices worth knowing (docs/numerics.md):
* ``eigh``/``eigvalsh``/``cholesky`` read one triangle of the input, as numpy does (``UPLO``,
  ``upper``): the traced function builds the Hermitian matrix from that triangle, so values equal
  numpy's for any input and the gradient is that of numpy's function (it is zero on the
  triangle that is not read). ``eigh(..., symmetrize_input=True)`` uses ``(a + a^H)/2`` instead
  (JAX's default), whose gradient is Hermitian.
* The 2-norm / Frobenius norm uses the ``l2norm`` op: its gradient at the zero vector is 0.
* Degenerate eigenvalues / singular values: a function of the values alone has a finite
  gradient (docs/numerics.md).
* Traced ``svd(full_matrices=True)`` works for square matrices only (where it equals the
  reduced SVD); traced ``qr`` supports modes 'reduced', 'r' and ('complete' when M <= N).
"""

from __future__ import annotations

import builtins
import operator
from collections import namedtuple

import numpy as np

from .. import ops
from ..ops import linalg as _lops
from ..tracing import Tracer, current_trace
from ._core import asarray_any, cast, normalize_axis

__all__ = ["EighResult", "LinAlgError", "QRResult", "SVDResult", "SlogdetResult", "cholesky",
           "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv",
           "lstsq", "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose",
           "multi_dot", "norm", "outer", "pinv", "qr", "slogdet", "solve", "svd", "svdvals",
           "tensordot", "tensorinv", "tensorsolve", "trace", "vecdot", "vector_norm"]

LinAlgError = np.linalg.LinAlgError


def _result_type(name, fields):
    try:
        from numpy.linalg import _linalg
        return getattr(_linalg, name)
    except (ImportError, AttributeError):   # pragma: no cover - older numpy layouts
        return namedtuple(name, fields)


SlogdetResult = _result_type("SlogdetResult", ["sign", "logabsdet"])
EighResult = _result_type("EighResult", ["eigenvalues", "eigenvectors"])
SVDResult = _result_type("SVDResult", ["U", "S", "Vh"])
QRResult = _result_type("QRResult", ["Q", "R"])

_NoValue = getattr(np, "_NoValue", None)

# --------------------------------------------------------------------------------------------
# promotion and checks (numpy.linalg's _commonType and _assert_* rules)
# --------------------------------------------------------------------------------------------


def _traced() -> bool:
    return current_trace() is not None


def _common_dtype(*xs) -> np.dtype:
    """The computation dtype numpy.linalg uses: float32/float64/complex64/complex128."""
    double = False
    cplx = False
    for x in xs:
        dt = x.dtype
        if dt.kind in "fc":
            if dt.kind == "c":
                cplx = True
            real = np.empty(0, dt).real.dtype
            if real == np.float64:
                double = True
            elif real != np.float32:
                raise TypeError(f"array type {dt} is unsupported in linalg")
        else:
            double = True
    if cplx:
        return np.dtype(np.complex128 if double else np.complex64)
    return np.dtype(np.float64 if double else np.float32)


def _prep(*xs):
    xs = [asarray_any(x) for x in xs]
    dt = _common_dtype(*xs)
    return [cast(x, dt) for x in xs]


def _assert_stacked_2d(*xs):
    for a in xs:
        if a.ndim < 2:
            raise LinAlgError(f"{a.ndim}-dimensional array given. Array must be at least "
                              "two-dimensional")


def _assert_stacked_square(*xs):
    _assert_stacked_2d(*xs)
    for a in xs:
        if a.shape[-1] != a.shape[-2]:
            raise LinAlgError("Last 2 dimensions of the array must be square")


def _hermitian_from(a, lower):
    """The Hermitian matrix numpy's LAPACK call sees when it reads one triangle of ``a``."""
    if lower:
        t, strict = _lops.tril(a), _lops.tril(a, -1)
    else:
        t, strict = _lops.triu(a), _lops.triu(a, 1)
    return ops.add(t, _lops.matrix_adjoint(strict))


def _uplo(UPLO):
    u = UPLO.upper()
    if u not in ("L", "U"):
        raise ValueError("UPLO argument must be 'L' or 'U'")
    return u == "L"


def _keepdims_reshape(y, shape, axes):
    return ops.reshape(y, tuple(1 if i in axes else n for i, n in enumerate(shape)))


# --------------------------------------------------------------------------------------------
# solve, inv, det, slogdet
# --------------------------------------------------------------------------------------------


def solve(a, b):
    """numpy.linalg.solve: ``x`` with ``a @ x == b``.

    ``b`` is a vector when it is 1-d (numpy 2 semantics), otherwise a stack of matrices
    ``(..., M, K)``; batch axes broadcast. Gradients flow to both operands.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.solve(np.array([[2.0, 0.0], [0.0, 4.0]]), np.array([2.0, 2.0]))
        array([1. , 0.5])
    """
    if not _traced():
        return np.linalg.solve(a, b)
    a, b = _prep(a, b)
    _assert_stacked_square(a)
    m = a.shape[-1]
    if b.ndim == 1:
        if b.shape[0] != m:
            raise ValueError(f"solve: shapes {a.shape} and {b.shape} do not align: Input "
                             f"operand 1 has a mismatch in its core dimension 0 (size "
                             f"{b.shape[0]} is different from {m})")
        bm = ops.broadcast_in_dim(b, (*a.shape[:-2], m, 1), (a.ndim - 2,))
        x = ops.solve(a, bm)
        return ops.reshape(x, a.shape[:-1])
    if b.shape[-2] != m:
        raise ValueError(f"solve: shapes {a.shape} and {b.shape} do not align: Input operand "
                         f"1 has a mismatch in its core dimension 0 (size {b.shape[-2]} is "
                         f"different from {m})")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = ops.broadcast_to_shape(a, batch + a.shape[-2:])
    b = ops.broadcast_to_shape(b, batch + b.shape[-2:])
    return ops.solve(a, b)


def inv(a):
    """numpy.linalg.inv.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.inv(np.array([[2.0, 0.0], [0.0, 4.0]]))
        array([[0.5 , 0.  ],
               [0.  , 0.25]])
    """
    if not _traced():
        return np.linalg.inv(a)
    (a,) = _prep(a)
    _assert_stacked_square(a)
    return ops.inv(a)


def det(a):
    """numpy.linalg.det; the gradient is ``det(a) * inv(a).T`` (computed with a solve).

    Example:
        >>> import functrace as ft, functrace.numpy as fnp, numpy as np
        >>> round(float(fnp.linalg.det(np.array([[2.0, 1.0], [1.0, 3.0]]))), 12)
        5.0
        >>> ft.grad(fnp.linalg.det)(np.array([[2.0, 1.0], [1.0, 3.0]]))
        array([[ 3., -1.],
               [-1.,  2.]])
    """
    if not _traced():
        return np.linalg.det(a)
    (a,) = _prep(a)
    _assert_stacked_square(a)
    return ops.det(a)


def slogdet(a):
    """numpy.linalg.slogdet: ``SlogdetResult(sign, logabsdet)``.

    The gradient of ``logabsdet`` is ``inv(a).T``; ``sign`` has a zero gradient for real input.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> sign, logabsdet = fnp.linalg.slogdet(np.array([[-2.0, 0.0], [0.0, 1.0]]))
        >>> float(sign), round(float(logabsdet), 6)
        (-1.0, 0.693147)
    """
    if not _traced():
        return np.linalg.slogdet(a)
    (a,) = _prep(a)
    _assert_stacked_square(a)
    sign, logabsdet = ops.slogdet(a)
    return SlogdetResult(sign, logabsdet)


# --------------------------------------------------------------------------------------------
# factorizations
# --------------------------------------------------------------------------------------------


def cholesky(a, /, *, upper=False):
    """numpy.linalg.cholesky: ``L`` with ``a = L @ L^H`` (``U`` with ``a = U^H @ U`` if
    ``upper``).

    Like numpy only one triangle of ``a`` is read (the lower one, the upper one if ``upper``);
    the gradient is zero on the other triangle.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.cholesky(np.array([[4.0, 2.0], [2.0, 2.0]]))
        array([[2., 0.],
               [1., 1.]])
    """
    if not _traced():
        return np.linalg.cholesky(a, upper=upper) if upper else np.linalg.cholesky(a)
    (a,) = _prep(a)
    _assert_stacked_square(a)
    L = ops.cholesky(_hermitian_from(a, not upper))
    return _lops.matrix_adjoint(L) if upper else L


def eigh(a, UPLO="L", *, symmetrize_input=False):
    """numpy.linalg.eigh: ``EighResult(eigenvalues, eigenvectors)``, eigenvalues ascending.

    Like numpy only the ``UPLO`` triangle is read. ``symmetrize_input=True`` (an extension,
    JAX's default) decomposes ``(a + a^H)/2`` instead, eagerly too. A function of the
    eigenvalues alone has a finite gradient even for repeated eigenvalues; eigenvector
    gradients are meaningful for functions that do not depend on each eigenvector's sign
    (phase).

    Example:
        >>> import functrace as ft, functrace.numpy as fnp, numpy as np
        >>> w, v = fnp.linalg.eigh(np.array([[2.0, 1.0], [1.0, 2.0]]))
        >>> w
        array([1., 3.])
        >>> ft.grad(lambda a: fnp.sum(fnp.linalg.eigh(a)[0] ** 2))(np.eye(2))  # repeated values
        array([[2., 0.],
               [0., 2.]])
    """
    if not _traced():
        if symmetrize_input:
            a = np.asarray(a)
            a = (a + np.conj(np.swapaxes(a, -1, -2))) / 2
        return np.linalg.eigh(a, UPLO)
    lower = _uplo(UPLO)
    (a,) = _prep(a)
    _assert_stacked_square(a)
    h = a if symmetrize_input else _hermitian_from(a, lower)
    w, v = ops.eigh(h, lower)
    return EighResult(w, v)


def eigvalsh(a, UPLO="L"):
    """numpy.linalg.eigvalsh: eigenvalues (ascending) of a Hermitian matrix (``UPLO`` triangle).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.eigvalsh(np.array([[2.0, 1.0], [1.0, 2.0]]))
        array([1., 3.])
    """
    if not _traced():
        return np.linalg.eigvalsh(a, UPLO)
    return eigh(a, UPLO)[0]


def _svd_hermitian(a, compute_uv):
    # numpy's hermitian path: eigh, |w| sorted descending, signs moved into Vh
    w, u = ops.eigh(_hermitian_from(a, True))
    s = ops.abs(w)
    last = a.ndim - 2
    if not compute_uv:
        return ops.rev(ops.sort(s, last)[0], (last,))
    from ._indexing import take_along_axis
    sgn = ops.select(ops.signbit(w), np.asarray(-1, w.dtype), np.asarray(1, w.dtype))
    sidx = ops.rev(ops.sort(s, last)[1], (last,))
    s = take_along_axis(s, sidx, axis=-1)
    sgn = take_along_axis(sgn, sidx, axis=-1)
    u = take_along_axis(u, sidx[..., None, :], axis=-1)
    vt = _lops.matrix_adjoint(ops.mul(u, cast(_lops.along_cols(sgn, u.shape), u.dtype)))
    return SVDResult(u, s, vt)


def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """numpy.linalg.svd: ``SVDResult(U, S, Vh)``, or ``S`` when not ``compute_uv``.

    Traced, ``full_matrices=True`` is supported for square matrices (where it equals the
    reduced SVD); use ``full_matrices=False`` otherwise. Singular-vector gradients are
    meaningful for functions invariant to the sign (phase) of each singular pair.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.svd(np.array([[3.0, 0.0], [0.0, -2.0]]), compute_uv=False)
        array([3., 2.])
    """
    if not _traced():
        return np.linalg.svd(a, full_matrices, compute_uv, hermitian)
    (a,) = _prep(a)
    if hermitian:
        _assert_stacked_square(a)
        return _svd_hermitian(a, compute_uv)
    _assert_stacked_2d(a)
    if not compute_uv:
        return ops.svd(a, False)[0]
    m, n = a.shape[-2:]
    if full_matrices and m != n:
        raise NotImplementedError(
            f"traced svd(full_matrices=True) of a non-square {m}x{n} matrix: the extra "
            "singular vectors are not unique, so they have no derivative. Pass "
            "full_matrices=False.")
    u, s, vh = ops.svd(a, True)
    return SVDResult(u, s, vh)


def svdvals(x, /):
    """numpy.linalg.svdvals: singular values, descending.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.svdvals(np.array([[0.0, 2.0], [1.0, 0.0]]))
        array([2., 1.])
    """
    if not _traced():
        return np.linalg.svdvals(x)
    return svd(x, compute_uv=False)


def qr(a, mode="reduced"):
    """numpy.linalg.qr: ``QRResult(Q, R)`` (mode 'reduced'), or ``R`` (mode 'r').

    Traced modes: 'reduced', 'r', and 'complete' when M <= N (where it equals 'reduced'). The
    derivative needs the leading square block of ``a`` to have full rank.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> q, r = fnp.linalg.qr(np.array([[3.0, 1.0], [4.0, 2.0]]))
        >>> np.allclose(q @ r, [[3.0, 1.0], [4.0, 2.0]])
        True
    """
    if not _traced():
        return np.linalg.qr(a, mode)
    if mode not in ("reduced", "complete", "r", "raw", "f", "full", "e", "economic"):
        raise ValueError(f"Unrecognized mode '{mode}'")
    (a,) = _prep(a)
    _assert_stacked_2d(a)
    m, n = a.shape[-2:]
    if mode in ("raw", "e", "economic") or (mode == "complete" and m > n):
        raise NotImplementedError(f"traced qr(mode={mode!r}) for a {m}x{n} matrix; use mode "
                                  "'reduced' or 'r'")
    q, r = ops.qr(a)
    if mode == "r":
        return r
    return QRResult(q, r)


# --------------------------------------------------------------------------------------------
# functions built on the factorizations
# --------------------------------------------------------------------------------------------


def pinv(a, rcond=None, hermitian=False, *, rtol=_NoValue):
    """numpy.linalg.pinv (Moore-Penrose pseudo-inverse via the SVD).

    The gradient is that of the SVD formula: exact where the rank does not change.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.pinv(np.array([[2.0, 0.0], [0.0, 0.0]]))
        array([[0.5, 0. ],
               [0. , 0. ]])
    """
    if not _traced():
        kw = {} if rtol is _NoValue else {"rtol": rtol}
        return np.linalg.pinv(a, rcond, hermitian, **kw)
    (a,) = _prep(a)
    _assert_stacked_2d(a)
    if rcond is None:
        if rtol is _NoValue:
            rcond = 1e-15
        elif rtol is None:
            rcond = builtins.max(a.shape[-2:]) * np.finfo(a.dtype).eps
        else:
            rcond = rtol
    elif rtol is not _NoValue:
        raise ValueError("`rtol` and `rcond` can't be both set.")
    from ._products import matmul as fmatmul
    from ._reductions import max as fmax
    from ._shape import swapaxes
    m, n = a.shape[-2:]
    if m == 0 or n == 0:
        return ops.broadcast_in_dim(np.zeros((), a.dtype), (*a.shape[:-2], n, m), ())
    if a.dtype.kind == "c":
        a = ops.conj(a)
    u, s, vt = svd(a, full_matrices=False, hermitian=hermitian)
    rc = np.asarray(rcond) if not isinstance(rcond, Tracer) else rcond
    cutoff = ops.mul(*_bcast2(cast(rc[..., None], s.dtype), fmax(s, axis=-1, keepdims=True)))
    cutoff = _bcast2(cutoff, s)[0]
    large = ops.gt(s, cutoff)
    one = np.asarray(1, s.dtype)
    sinv = ops.select(large, ops.div(one, ops.select(large, s, one)), np.asarray(0, s.dtype))
    sinv = cast(sinv, a.dtype)
    return fmatmul(swapaxes(vt, -1, -2), ops.mul(*_bcast2(sinv[..., None], swapaxes(u, -1, -2))))


def _bcast2(x, y):
    from ._core import broadcast_all
    return broadcast_all(x, y)[1]


def matrix_power(a, n):
    """numpy.linalg.matrix_power: ``a`` to the integer power ``n`` (repeated squaring; a
    negative ``n`` inverts first). Integer matrices stay integer for ``n >= 0``, like numpy.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.matrix_power(np.array([[1.0, 1.0], [0.0, 1.0]]), 3)
        array([[1., 3.],
               [0., 1.]])
    """
    if not _traced():
        return np.linalg.matrix_power(a, n)
    a = asarray_any(a)
    _assert_stacked_square(a)
    try:
        n = operator.index(n)
    except TypeError as e:
        raise TypeError("exponent must be an integer") from e
    from ._products import matmul as fmatmul
    if n == 0:
        return _lops.eye_like(a.shape, a.dtype)
    if n < 0:
        a = inv(a)
        n = builtins.abs(n)
    if n == 1:
        return a
    if n == 2:
        return fmatmul(a, a)
    if n == 3:
        return fmatmul(fmatmul(a, a), a)
    z = result = None
    while n > 0:
        z = a if z is None else fmatmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else fmatmul(result, z)
    return result


def _chain_order(shapes):
    # numpy's _multi_dot_matrix_chain_order (same costs, same tie-breaking)
    n = len(shapes)
    p = [s[0] for s in shapes] + [shapes[-1][1]]
    m = np.zeros((n, n))
    s = np.empty((n, n), dtype=np.intp)
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            m[i, j] = np.inf
            for k in range(i, j):
                q = m[i, k] + m[k + 1, j] + p[i] * p[k + 1] * p[j + 1]
                if q < m[i, j]:
                    m[i, j] = q
                    s[i, j] = k
    return s


def multi_dot(arrays, *, out=None):
    """numpy.linalg.multi_dot: the product of a chain of matrices in the cheapest order
    (numpy's order, so the rounding is numpy's too). The first / last may be 1-d.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.multi_dot([np.ones(2), np.eye(2), np.ones((2, 3))])
        array([2., 2., 2.])
    """
    if not _traced():
        return np.linalg.multi_dot(arrays, out=out)
    if out is not None:
        raise TypeError("out= is not supported on traced arrays (they are immutable)")
    from ._products import dot as fdot
    n = len(arrays)
    if n < 2:
        raise ValueError("Expecting at least two arrays.")
    if n == 2:
        return fdot(arrays[0], arrays[1])
    arrays = [asarray_any(x) for x in arrays]
    nd_first, nd_last = arrays[0].ndim, arrays[-1].ndim
    if nd_first == 1:
        arrays[0] = ops.reshape(arrays[0], (1, arrays[0].shape[0]))
    if nd_last == 1:
        arrays[-1] = ops.reshape(arrays[-1], (arrays[-1].shape[0], 1))
    for x in arrays:
        if x.ndim != 2:
            raise LinAlgError(f"{x.ndim}-dimensional array given. Array must be "
                              "two-dimensional")
    if n == 3:
        A, B, C = arrays
        a0, a1b0 = A.shape
        b1c0, c1 = C.shape
        if a0 * b1c0 * (a1b0 + c1) < a1b0 * c1 * (a0 + b1c0):
            res = fdot(fdot(A, B), C)
        else:
            res = fdot(A, fdot(B, C))
    else:
        order = _chain_order([x.shape for x in arrays])

        def rec(i, j):
            if i == j:
                return arrays[i]
            return fdot(rec(i, order[i, j]), rec(order[i, j] + 1, j))
        res = rec(0, n - 1)
    if nd_first == 1 and nd_last == 1:
        return ops.reshape(res, ())
    if nd_first == 1 or nd_last == 1:
        return ops.reshape(res, (res.size,))
    return res


def matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    """numpy.linalg.matrix_rank (an integer: not differentiable, but traceable).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> int(fnp.linalg.matrix_rank(np.array([[1.0, 2.0], [2.0, 4.0]])))
        1
    """
    if not _traced():
        return np.linalg.matrix_rank(A, tol, hermitian, rtol=rtol)
    if rtol is not None and tol is not None:
        raise ValueError("`tol` and `rtol` can't be both set.")
    from ._reductions import any as fany
    from ._reductions import count_nonzero
    from ._reductions import max as fmax
    x = asarray_any(A)
    if x.ndim < 2:
        return cast(fany(ops.ne(x, np.zeros((), x.dtype))), np.intp)
    S = ops.stop_gradient(svd(x, compute_uv=False, hermitian=hermitian))
    if tol is None:
        if rtol is None:
            rtol_ = np.asarray(builtins.max(x.shape[-2:]) * np.finfo(S.dtype).eps, S.dtype)
        else:
            rtol_ = cast(asarray_any(rtol)[..., None], S.dtype)
        smax = fmax(S, axis=-1, keepdims=True, initial=0)
        tol_ = ops.mul(*_bcast2(smax, rtol_))
    else:
        tol_ = cast(asarray_any(tol)[..., None], S.dtype)
    return count_nonzero(ops.gt(*_bcast2(S, tol_)), axis=-1)


def cond(x, p=None):
    """numpy.linalg.cond: the condition number in the norm ``p`` (None, 2, -2 via the SVD;
    'fro', 'nuc', 1, -1, inf, -inf via ``norm(x) * norm(inv(x))``).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.linalg.cond(np.array([[2.0, 0.0], [0.0, 0.5]])))
        4.0
    """
    if not _traced():
        return np.linalg.cond(x, p)
    (x,) = _prep(x)
    _assert_stacked_2d(x)
    if x.shape[-1] == 0 or x.shape[-2] == 0:
        raise LinAlgError("cond is not defined on empty arrays")
    if p is None or p in (2, -2):
        s = svd(x, compute_uv=False)
        r = ops.div(s[..., -1], s[..., 0]) if p == -2 else ops.div(s[..., 0], s[..., -1])
    else:
        _assert_stacked_square(x)
        r = ops.mul(norm(x, p, axis=(-2, -1)), norm(inv(x), p, axis=(-2, -1)))
    # numpy turns NaN (a failed inversion) into inf unless x itself holds NaN
    from ._reductions import any as fany
    bad = ops.logical_and(ops.isnan(r), ops.logical_not(fany(ops.isnan(x), axis=(-2, -1))))
    return ops.select(bad, np.asarray(np.inf, r.dtype), r)


# --------------------------------------------------------------------------------------------
# norms
# --------------------------------------------------------------------------------------------


def _is(ord_, value):
    return not isinstance(ord_, str) and ord_ is not None and ord_ == value


def _vector_norm_traced(x, ord, ax, keepdims):
    shape = x.shape
    rdt = np.empty(0, x.dtype).real.dtype
    if _is(ord, np.inf):
        if shape[ax] == 0:
            y = ops.broadcast_in_dim(np.zeros((), rdt), tuple(n for i, n in enumerate(shape)
                                                              if i != ax), ())
        else:
            y = ops.reduce_max(ops.abs(x), (ax,))
    elif _is(ord, -np.inf):
        if shape[ax] == 0:
            raise ValueError("zero-size array to reduction operation minimum which has no "
                             "identity")
        y = ops.reduce_min(ops.abs(x), (ax,))
    elif _is(ord, 0):
        nz = ops.convert_element_type(ops.ne(x, np.zeros((), x.dtype)), rdt)
        y = ops.reduce_sum(nz, (ax,))
    elif _is(ord, 1):
        y = ops.reduce_sum(ops.abs(x), (ax,))
    elif ord is None or _is(ord, 2):
        y = ops.l2norm(x, (ax,))
    elif isinstance(ord, str):
        raise ValueError(f"Invalid norm order '{ord}' for vectors")
    else:
        p = np.asarray(ord, rdt)
        s = ops.reduce_sum(ops.pow(ops.abs(x), p), (ax,))
        # s ** (1/p), with s == 0 giving 0 and a zero (not NaN) derivative
        zero = ops.eq(s, np.zeros((), rdt))
        safe = ops.select(zero, np.ones((), rdt), s)
        y = ops.select(zero, np.zeros((), rdt),
                       ops.pow(safe, np.reciprocal(p)))
    return _keepdims_reshape(y, shape, (ax,)) if keepdims else y


def _svd_values_last2(x, row, col):
    nd = x.ndim
    rest = tuple(i for i in range(nd) if i not in (row, col))
    y = ops.transpose(x, (*rest, row, col))
    return ops.svd(y, False)[0]


def _matrix_norm_traced(x, ord, row, col, keepdims):
    nd = x.ndim
    row = normalize_axis(row, nd)
    col = normalize_axis(col, nd)
    if row == col:
        raise ValueError("Duplicate axes given.")
    shape = x.shape
    if _is(ord, 2) or _is(ord, -2) or ord == "nuc":
        s = _svd_values_last2(x, row, col)
        last = s.ndim - 1
        if ord == "nuc":
            y = ops.reduce_sum(s, (last,))
        elif _is(ord, 2):
            y = ops.reduce_max(s, (last,))
        else:
            y = ops.reduce_min(s, (last,))
    elif _is(ord, 1) or _is(ord, -1):
        c = col - 1 if col > row else col
        red = ops.reduce_max if _is(ord, 1) else ops.reduce_min
        y = red(ops.reduce_sum(ops.abs(x), (row,)), (c,))
    elif _is(ord, np.inf) or _is(ord, -np.inf):
        r = row - 1 if row > col else row
        red = ops.reduce_max if _is(ord, np.inf) else ops.reduce_min
        y = red(ops.reduce_sum(ops.abs(x), (col,)), (r,))
    elif ord is None or ord in ("fro", "f"):
        y = ops.l2norm(x, (row, col))
    else:
        raise ValueError("Invalid norm order for matrices.")
    return _keepdims_reshape(y, shape, (row, col)) if keepdims else y


def norm(x, ord=None, axis=None, keepdims=False):
    """numpy.linalg.norm: every vector and matrix order numpy supports.

    Vector orders (one axis): None/2 (Euclidean), inf, -inf, 0 (count of non-zeros, zero
    gradient), 1, -1, other real ``p`` (``sum(|x|**p)**(1/p)``). Matrix orders (two axes, or a
    2-d input with ``axis=None``): None/'fro' (Frobenius), 'nuc' (sum of singular values), 2 /
    -2 (largest / smallest singular value), 1 / -1 (max / min column sum), inf / -inf (max / min
    row sum). The 2-norm and Frobenius norm use the ``l2norm`` op, whose gradient at the zero
    vector is 0 (docs/numerics.md); max/min orders split the gradient evenly between ties.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.linalg.norm(np.array([3.0, 4.0])))
        5.0
        >>> float(fnp.linalg.norm(np.array([[1.0, -2.0], [3.0, 4.0]]), ord=1))
        6.0
    """
    if not _traced():
        return np.linalg.norm(x, ord, axis, keepdims)
    x = asarray_any(x)
    if x.dtype.kind not in "fc":
        x = cast(x, np.float64)
    nd = x.ndim
    if axis is None:
        if ord is None or (ord in ("f", "fro") and nd == 2) or (_is(ord, 2) and nd == 1):
            y = ops.l2norm(x, tuple(range(nd)))
            return ops.reshape(y, (1,) * nd) if keepdims else y
        axis = tuple(range(nd))
    elif not isinstance(axis, tuple):
        try:
            axis = int(axis)
        except Exception as e:
            raise TypeError("'axis' must be None, an integer or a tuple of integers") from e
        axis = (axis,)
    if len(axis) == 1:
        return _vector_norm_traced(x, ord, normalize_axis(axis[0], nd), keepdims)
    if len(axis) == 2:
        return _matrix_norm_traced(x, ord, axis[0], axis[1], keepdims)
    raise ValueError("Improper number of dimensions to norm.")


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """numpy.linalg.vector_norm: a vector norm over one axis, several axes, or all of them.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.linalg.vector_norm(np.ones((2, 2))))
        2.0
    """
    if not _traced():
        return np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)
    x = asarray_any(x)
    if x.dtype.kind not in "fc":
        x = cast(x, np.float64)
    shape = x.shape
    nd = x.ndim
    if axis is None:
        y = norm(ops.reshape(x, (x.size,)), ord=ord, axis=0)
        axes = tuple(range(nd))
    elif isinstance(axis, tuple):
        axes = tuple(normalize_axis(a, nd) for a in axis)
        if len(set(axes)) != len(axes):
            raise ValueError("repeated axis")
        rest = tuple(i for i in range(nd) if i not in axes)
        xt = ops.transpose(x, axes + rest)
        size = int(np.prod([shape[i] for i in axes], dtype=np.int64))
        y = norm(ops.reshape(xt, (size, *tuple(shape[i] for i in rest))), ord=ord, axis=0)
    else:
        axes = (normalize_axis(axis, nd),)
        y = norm(x, ord=ord, axis=axes[0])
    if keepdims:
        y = _keepdims_reshape(y, shape, axes)
    return y


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """numpy.linalg.matrix_norm: a matrix norm over the last two axes.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.linalg.matrix_norm(np.eye(2), ord="nuc"))
        2.0
    """
    if not _traced():
        return np.linalg.matrix_norm(x, keepdims=keepdims, ord=ord)
    return norm(x, axis=(-2, -1), keepdims=keepdims, ord=ord)


# --------------------------------------------------------------------------------------------
# the array-API names numpy.linalg re-exports
# --------------------------------------------------------------------------------------------


def trace(x, /, *, offset=0, dtype=None):
    """numpy.linalg.trace: the trace over the last two axes.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.linalg.trace(np.eye(3)))
        3.0
    """
    if not _traced():
        return np.linalg.trace(x, offset=offset, dtype=dtype)
    from ._shape import trace as ftrace
    return ftrace(x, offset, -2, -1, dtype)


def diagonal(x, /, *, offset=0):
    """numpy.linalg.diagonal: the diagonals of the last two axes.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.diagonal(np.eye(2))
        array([1., 1.])
    """
    if not _traced():
        return np.linalg.diagonal(x, offset=offset)
    from ._shape import diagonal as fdiagonal
    return fdiagonal(x, offset, -2, -1)


def outer(x1, x2, /):
    """numpy.linalg.outer (1-d operands only).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.outer(np.array([1.0, 2.0]), np.array([1.0, 0.0]))
        array([[1., 0.],
               [2., 0.]])
    """
    if not _traced():
        return np.linalg.outer(x1, x2)
    a, b = asarray_any(x1), asarray_any(x2)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError("Input arrays must be one-dimensional, but they are "
                         f"x1.ndim={a.ndim} and x2.ndim={b.ndim}.")
    from ._products import outer as fouter
    return fouter(a, b)


def matmul(x1, x2, /):
    """numpy.linalg.matmul.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.matmul(np.eye(2), np.array([1.0, 2.0]))
        array([1., 2.])
    """
    if not _traced():
        return np.linalg.matmul(x1, x2)
    from ._products import matmul as fmatmul
    return fmatmul(x1, x2)


def tensordot(x1, x2, /, *, axes=2):
    """numpy.linalg.tensordot.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> float(fnp.linalg.tensordot(np.eye(2), np.eye(2)))
        2.0
    """
    if not _traced():
        return np.linalg.tensordot(x1, x2, axes=axes)
    from ._products import tensordot as ftensordot
    return ftensordot(x1, x2, axes)


def vecdot(x1, x2, /, *, axis=-1):
    """numpy.linalg.vecdot.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.vecdot(np.ones((2, 3)), np.ones(3))
        array([3., 3.])
    """
    if not _traced():
        return np.linalg.vecdot(x1, x2, axis=axis)
    from ._products import vecdot as fvecdot
    return fvecdot(x1, x2, axis=axis)


def cross(x1, x2, /, *, axis=-1):
    """numpy.linalg.cross (3-vectors).

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.cross(np.array([1.0, 0, 0]), np.array([0.0, 1, 0]))
        array([0., 0., 1.])
    """
    if not _traced():
        return np.linalg.cross(x1, x2, axis=axis)
    a, b = asarray_any(x1), asarray_any(x2)
    if a.shape[axis] != 3 or b.shape[axis] != 3:
        raise ValueError("Both input arrays must be (arrays of) 3-dimensional vectors, but they "
                         f"are {a.shape[axis]} and {b.shape[axis]} dimensional instead.")
    from ._products import cross as fcross
    return fcross(a, b, axis=axis)


def matrix_transpose(x, /):
    """numpy.linalg.matrix_transpose: swap the last two axes.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.matrix_transpose(np.zeros((2, 3))).shape
        (3, 2)
    """
    if not _traced():
        return np.linalg.matrix_transpose(x)
    x = asarray_any(x)
    if x.ndim < 2:
        raise ValueError("Input array must be at least 2-dimensional")
    return _lops.matrix_transpose(x)


def tensorinv(a, ind=2):
    """numpy.linalg.tensorinv.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.tensorinv(np.eye(4).reshape(4, 2, 2), ind=1).shape
        (2, 2, 4)
    """
    if not _traced():
        return np.linalg.tensorinv(a, ind)
    a = asarray_any(a)
    old = a.shape
    if ind <= 0:
        raise ValueError("Invalid ind argument.")
    inv_shape = old[ind:] + old[:ind]
    prod = int(np.prod(old[ind:], dtype=np.int64))
    ia = inv(ops.reshape(a, (prod, a.size // prod if prod else 0)))
    return ops.reshape(ia, inv_shape)


def tensorsolve(a, b, axes=None):
    """numpy.linalg.tensorsolve.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.tensorsolve(np.eye(4).reshape(2, 2, 2, 2), np.ones((2, 2))).shape
        (2, 2)
    """
    if not _traced():
        return np.linalg.tensorsolve(a, b, axes)
    a, b = asarray_any(a), asarray_any(b)
    an = a.ndim
    if axes is not None:
        allaxes = list(range(an))
        for k in axes:
            allaxes.remove(k)
            allaxes.insert(an, k)
        a = ops.transpose(a, tuple(allaxes))
    old = a.shape[-(an - b.ndim):]
    prod = int(np.prod(old, dtype=np.int64))
    if a.size != prod ** 2:
        raise LinAlgError("Input arrays must satisfy the requirement "
                          "prod(a.shape[b.ndim:]) == prod(a.shape[:b.ndim])")
    res = solve(ops.reshape(a, (prod, prod)), ops.reshape(b, (b.size,)))
    return ops.reshape(res, old)


def _eager_only(name, npfn, hint):
    def f(*args, **kwargs):
        if not _traced():
            return npfn(*args, **kwargs)
        raise NotImplementedError(f"fnp.linalg.{name} is not traceable: {hint}")
    f.__name__ = name
    f.__doc__ = (f"numpy.linalg.{name} (eager only: {hint}).\n\n"
                 f"Example:\n    >>> import functrace.numpy as fnp, numpy as np\n"
                 f"    >>> fnp.linalg.{name} is not None\n    True\n")
    return f


eig = _eager_only("eig", np.linalg.eig, "non-Hermitian eigenvectors are not supported; use "
                  "eigh for Hermitian matrices")
eigvals = _eager_only("eigvals", np.linalg.eigvals, "use eigvalsh for Hermitian matrices")
lstsq = _eager_only("lstsq", np.linalg.lstsq, "use pinv(a) @ b or solve(a.T @ a, a.T @ b)")
