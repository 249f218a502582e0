"""``functrace.numpy.linalg``'s solvers and decompositions: ``solve``, ``inv``, ``det``,
``slogdet``, ``cholesky``, ``eigh``/``eigvalsh``, ``svd``/``svdvals``, ``qr``, and what is built
on them (``pinv``, ``matrix_power``, ``multi_dot``, ``matrix_rank``, ``cond``, ``tensorinv``,
``tensorsolve``, ``lstsq``), and ``eig``/``eigvals`` (the ``eig`` op of ``ops.matfuncs``).

Each records the primitives of ``functrace.ops.linalg`` and ``ops.decomp``, whose rules make it
differentiable to any order. Imports ``ops``, ``numpy._core``, ``_linalg_common`` and
``_linalg_norms`` (``cond`` takes norms).
"""

from __future__ import annotations

import builtins
import operator

import numpy as np

from .. import ops
from ..ops import linalg as _lops
from ..tracing import Tracer
from ._core import asarray_any, cast
from ._linalg_common import (
    NO_VALUE,
    EighResult,
    EigResult,
    LinAlgError,
    QRResult,
    SlogdetResult,
    SVDResult,
    assert_stacked_2d,
    assert_stacked_square,
    check_gradient,
    hermitian_input,
    prep,
    traced,
    uplo,
)
from ._linalg_norms import norm

__all__ = ["solve", "inv", "det", "slogdet", "cholesky", "eigh", "eigvalsh", "svd", "svdvals", "qr",
           "pinv", "matrix_power", "multi_dot", "matrix_rank", "cond", "tensorinv", "tensorsolve",
           "eig", "eigvals", "lstsq"]

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
    if not traced():
        return np.linalg.solve(a, b)
    a, b = prep(a, b)
    assert_stacked_square(a)
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
    if not traced():
        return np.linalg.inv(a)
    (a,) = prep(a)
    assert_stacked_square(a)
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
    if not traced():
        return np.linalg.det(a)
    (a,) = prep(a)
    assert_stacked_square(a)
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
    if not traced():
        return np.linalg.slogdet(a)
    (a,) = prep(a)
    assert_stacked_square(a)
    sign, logabsdet = ops.slogdet(a)
    return SlogdetResult(sign, logabsdet)


# --------------------------------------------------------------------------------------------
# factorizations
# --------------------------------------------------------------------------------------------


def cholesky(a, /, *, upper=False, gradient="symmetric"):
    """numpy.linalg.cholesky: ``L`` with ``a = L @ L^H`` (``U`` with ``a = U^H @ U`` if
    ``upper``).

    Like numpy only one triangle of ``a`` is read (the lower one, the upper one if ``upper``),
    so values are numpy's for any input. ``gradient`` (an extension) picks the derivative
    (docs/numerics.md): ``"symmetric"`` (the default, as JAX and autograd) is the gradient
    within Hermitian matrices, itself Hermitian; ``"triangle"`` is the exact gradient of
    numpy's function, zero on the triangle that is not read.

    Example:
        >>> import functrace as ft, functrace.numpy as fnp, numpy as np
        >>> a = np.array([[4.0, 2.0], [2.0, 2.0]])
        >>> fnp.linalg.cholesky(a)
        array([[2., 0.],
               [1., 1.]])
        >>> ft.grad(lambda a: fnp.linalg.cholesky(a)[1, 0])(a)
        array([[-0.125,  0.25 ],
               [ 0.25 ,  0.   ]])
        >>> ft.grad(lambda a: fnp.linalg.cholesky(a, gradient="triangle")[1, 0])(a)
        array([[-0.125,  0.   ],
               [ 0.5  ,  0.   ]])
    """
    if not traced():
        check_gradient(gradient)
        return np.linalg.cholesky(a, upper=upper) if upper else np.linalg.cholesky(a)
    (a,) = prep(a)
    assert_stacked_square(a)
    L = ops.cholesky(hermitian_input(a, not upper, gradient))
    return _lops.matrix_adjoint(L) if upper else L


def eigh(a, UPLO="L", *, symmetrize_input=False, gradient="symmetric"):
    """numpy.linalg.eigh: ``EighResult(eigenvalues, eigenvectors)``, eigenvalues ascending.

    Like numpy only the ``UPLO`` triangle is read, so values are numpy's for any input.
    ``gradient`` (an extension) picks the derivative (docs/numerics.md): ``"symmetric"`` (the
    default, as JAX) is the gradient within Hermitian matrices, itself Hermitian;
    ``"triangle"`` is the exact gradient of numpy's function (autograd's), zero on the triangle
    that is not read. ``symmetrize_input=True`` (an extension, JAX's default) decomposes
    ``(a + a^H)/2`` instead, eagerly too (its gradient is symmetric either way). A function of the
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
        >>> a = np.array([[2.0, 1.0], [1.0, 2.0]])
        >>> ft.grad(lambda a: fnp.linalg.eigh(a)[0][1])(a)
        array([[0.5, 0.5],
               [0.5, 0.5]])
        >>> ft.grad(lambda a: fnp.linalg.eigh(a, gradient="triangle")[0][1])(a)
        array([[0.5, 0. ],
               [1. , 0.5]])
    """
    if not traced():
        check_gradient(gradient)
        if symmetrize_input:
            a = np.asarray(a)
            a = (a + np.conj(np.swapaxes(a, -1, -2))) / 2
        return np.linalg.eigh(a, UPLO)
    lower = uplo(UPLO)
    (a,) = prep(a)
    assert_stacked_square(a)
    h = a if symmetrize_input else hermitian_input(a, lower, gradient)
    w, v = ops.eigh(h, lower)
    return EighResult(w, v)


def eigvalsh(a, UPLO="L", *, gradient="symmetric"):
    """numpy.linalg.eigvalsh: eigenvalues (ascending) of a Hermitian matrix (``UPLO`` triangle).

    ``gradient`` is ``eigh``'s: Hermitian by default, ``"triangle"`` for the exact gradient of
    numpy's function. A function of the eigenvalues has a finite gradient even when they repeat.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.eigvalsh(np.array([[2.0, 1.0], [1.0, 2.0]]))
        array([1., 3.])
    """
    if not traced():
        check_gradient(gradient)
        return np.linalg.eigvalsh(a, UPLO)
    return eigh(a, UPLO, gradient=gradient)[0]


def _svd_hermitian(a, compute_uv):
    # numpy's hermitian path: eigh, |w| sorted descending, signs moved into Vh; the gradient
    # is the symmetric one, as eigh's default
    w, u = ops.eigh(hermitian_input(a, True))
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
    if not traced():
        return np.linalg.svd(a, full_matrices, compute_uv, hermitian)
    (a,) = prep(a)
    if hermitian:
        assert_stacked_square(a)
        return _svd_hermitian(a, compute_uv)
    assert_stacked_2d(a)
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
    if not traced():
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
    if not traced():
        return np.linalg.qr(a, mode)
    if mode not in ("reduced", "complete", "r", "raw", "f", "full", "e", "economic"):
        raise ValueError(f"Unrecognized mode '{mode}'")
    (a,) = prep(a)
    assert_stacked_2d(a)
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


def pinv(a, rcond=None, hermitian=False, *, rtol=NO_VALUE):
    """numpy.linalg.pinv (Moore-Penrose pseudo-inverse via the SVD).

    The gradient is that of the SVD formula: exact where the rank does not change.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.pinv(np.array([[2.0, 0.0], [0.0, 0.0]]))
        array([[0.5, 0. ],
               [0. , 0. ]])
    """
    if not traced():
        kw = {} if rtol is NO_VALUE else {"rtol": rtol}
        return np.linalg.pinv(a, rcond, hermitian, **kw)
    (a,) = prep(a)
    assert_stacked_2d(a)
    if rcond is None:
        if rtol is NO_VALUE:
            rcond = 1e-15
        elif rtol is None:
            rcond = builtins.max(a.shape[-2:]) * np.finfo(a.dtype).eps
        else:
            rcond = rtol
    elif rtol is not NO_VALUE:
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
    if not traced():
        return np.linalg.matrix_power(a, n)
    a = asarray_any(a)
    assert_stacked_square(a)
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
    if not traced():
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
    if not traced():
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
    if not traced():
        return np.linalg.cond(x, p)
    (x,) = prep(x)
    assert_stacked_2d(x)
    if x.shape[-1] == 0 or x.shape[-2] == 0:
        raise LinAlgError("cond is not defined on empty arrays")
    if p is None or p in (2, -2):
        s = svd(x, compute_uv=False)
        r = ops.div(s[..., -1], s[..., 0]) if p == -2 else ops.div(s[..., 0], s[..., -1])
    else:
        assert_stacked_square(x)
        r = ops.mul(norm(x, p, axis=(-2, -1)), norm(inv(x), p, axis=(-2, -1)))
    # numpy turns NaN (a failed inversion) into inf unless x itself holds NaN
    from ._reductions import any as fany
    bad = ops.logical_and(ops.isnan(r), ops.logical_not(fany(ops.isnan(x), axis=(-2, -1))))
    return ops.select(bad, np.asarray(np.inf, r.dtype), r)


def tensorinv(a, ind=2):
    """numpy.linalg.tensorinv.

    Example:
        >>> import functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.tensorinv(np.eye(4).reshape(4, 2, 2), ind=1).shape
        (2, 2, 4)
    """
    if not traced():
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
    if not traced():
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


def eig(a):
    """numpy.linalg.eig: ``EigResult(eigenvalues, eigenvectors)`` of a general square matrix,
    eigenvectors as unit-norm columns.

    Traced, both are always complex (numpy returns real arrays when every eigenvalue is real:
    a dtype that depends on values; JAX always returns complex too). Differentiable: the
    eigenvalues wherever they are distinct; the eigenvectors for functions that do not depend
    on each eigenvector's phase (sign), as in JAX, since LAPACK's phase choice has no
    derivative the rule can follow. Terms ``1/(w_j - w_i)`` of equal eigenvalues are masked,
    as eigh's (docs/numerics.md).

    Example:
        >>> import functrace as ft, functrace.numpy as fnp, numpy as np
        >>> a = np.array([[2.0, 1.0], [0.0, 3.0]])
        >>> fnp.linalg.eig(a).eigenvalues
        array([2., 3.])
        >>> ft.grad(lambda a: fnp.real(fnp.linalg.eig(a)[0][1]))(a)   # u v^T / (u . v)
        array([[0., 0.],
               [1., 1.]])
    """
    if not traced():
        return np.linalg.eig(a)
    (a,) = prep(a)
    assert_stacked_square(a)
    w, v = ops.eig(a, True)
    return EigResult(w, v)


def eigvals(a):
    """numpy.linalg.eigvals: the eigenvalues of a general square matrix (LAPACK's order).

    Traced, always complex (see ``eig``); differentiable where they are distinct.

    Example:
        >>> import functrace as ft, functrace.numpy as fnp, numpy as np
        >>> fnp.linalg.eigvals(np.array([[0.0, -1.0], [1.0, 0.0]]))
        array([0.+1.j, 0.-1.j])
        >>> ft.grad(lambda a: fnp.sum(fnp.real(fnp.linalg.eigvals(a) ** 2)))(np.eye(2) * 2)
        array([[4., 0.],
               [0., 4.]])
    """
    if not traced():
        return np.linalg.eigvals(a)
    (a,) = prep(a)
    assert_stacked_square(a)
    return ops.eig(a, False)[0]


def lstsq(a, b, rcond=None):
    """numpy.linalg.lstsq: ``(x, residuals, rank, s)``, the least-squares solution through the
    SVD (singular values below ``rcond * s.max()`` are dropped; ``rcond=None`` is
    ``eps * max(M, N)``, numpy's default).

    Traced, ``residuals`` has numpy's full-rank shape, ``(K,)`` (``(1,)`` for a 1-d ``b``) when
    M > N and ``(0,)`` otherwise: numpy returns an empty array for a rank-deficient tall
    matrix, a shape that depends on values, and the traced function returns the residuals
    computed anyway. ``x``, ``residuals`` and ``s`` are differentiable where the rank does not
    change and the singular values are distinct; ``rank`` is an integer.

    Example:
        >>> import functrace as ft, functrace.numpy as fnp, numpy as np
        >>> a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
        >>> x, res, rank, s = fnp.linalg.lstsq(a, np.array([1.0, 1.0, 3.0]))
        >>> x.round(6), res.round(6), int(rank)
        (array([1.333333, 1.333333]), array([0.333333]), 2)
    """
    if not traced():
        return np.linalg.lstsq(a, b, rcond)
    a, b = prep(a, b)
    if a.ndim != 2:
        raise LinAlgError(f"{a.ndim}-dimensional array given. Array must be two-dimensional")
    m, n = a.shape
    vec = b.ndim == 1
    if vec:
        b = ops.reshape(b, (b.shape[0], 1))
    if b.ndim != 2 or b.shape[0] != m:
        raise LinAlgError("Incompatible dimensions")
    if rcond is None:
        rcond = np.finfo(a.dtype).eps * builtins.max(m, n)
    rdt = np.empty(0, a.dtype).real.dtype
    if builtins.min(m, n) == 0:
        raise NotImplementedError("traced lstsq of an empty matrix")
    u, s, vh = ops.svd(a, True)
    cutoff = ops.mul(np.asarray(rcond, rdt), ops.reduce_max(s, (0,)))
    large = ops.gt(s, cutoff)
    one = np.ones((), rdt)
    sinv = ops.select(large, ops.div(one, ops.select(large, s, one)), np.zeros((), rdt))
    rank = cast(ops.reduce_sum(cast(large, np.int32), (0,)), np.int32)
    uhb = _lops.mm(_lops.matrix_adjoint(u), b)                                  # (r, K)
    y = ops.mul(uhb, _lops.along_rows(cast(sinv, a.dtype), uhb.shape))
    x = _lops.mm(_lops.matrix_adjoint(vh), y)                                   # (N, K)
    if m > n:
        r = ops.sub(b, _lops.mm(a, x))
        resid = ops.reduce_sum(ops.real(ops.mul(ops.conj(r), r)) if a.dtype.kind == "c"
                               else ops.mul(r, r), (0,))
    else:
        resid = ops.broadcast_in_dim(np.zeros((), rdt), (0,), ())
    if vec:
        x = ops.reshape(x, (n,))
        if m > n:
            resid = ops.reshape(resid, (1,))
    return x, resid, rank, s
